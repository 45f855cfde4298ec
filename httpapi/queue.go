package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/auth"
)

// Admission is the waiting room and the deny list; *admission.Queue
// implements it.
type Admission interface {
	Join(ctx context.Context, voucherID, userID int64) (*admission.Ticket, error)
	Poll(ctx context.Context, voucherID, userID int64, ticket string) (*admission.Ticket, error)
	Denied(ctx context.Context, userID int64, ip netip.Addr) (bool, error)
	SetDenyList(ctx context.Context, d admission.DenyList) (admission.DenyList, error)
	DenyList(ctx context.Context) (admission.DenyList, error)
}

var _ Admission = (*admission.Queue)(nil)

// errNoAdmission answers the routes of a server without a waiting room.
var errNoAdmission = flashsale.Errorf(flashsale.EUnavailable, "this server has no waiting room")

// deny refuses a user or client address on the deny list with EDenied.
func (s *Server) deny(r *http.Request, userID int64) error {
	if s.Admission == nil {
		return nil
	}
	ip, _ := s.clientAddr(r)
	denied, err := s.Admission.Denied(r.Context(), userID, ip)
	if err != nil {
		return err
	}
	if denied {
		return flashsale.Errorf(flashsale.EDenied, "you may not buy in this sale")
	}
	return nil
}

// queueUser authenticates a buyer on a queue route, not denied, and reads
// the voucher from the path.
func (s *Server) queueUser(r *http.Request) (voucherID, userID int64, err error) {
	if s.Admission == nil {
		return 0, 0, errNoAdmission
	}
	if userID, err = s.user(r); err != nil {
		return 0, 0, err
	}
	if err = s.deny(r, userID); err != nil {
		return 0, 0, err
	}
	voucherID, err = pathID(r, "id")
	return voucherID, userID, err
}

// joinQueue puts the buyer in the voucher's waiting room (again: the same
// ticket).
func (s *Server) joinQueue(w http.ResponseWriter, r *http.Request) {
	voucherID, userID, err := s.queueUser(r)
	if err == nil {
		err = s.limit(r, userID)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.Admission.Join(r.Context(), voucherID, userID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// pollQueue shows the buyer's ticket: Redis only.
func (s *Server) pollQueue(w http.ResponseWriter, r *http.Request) {
	voucherID, userID, err := s.queueUser(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.Admission.Poll(r.Context(), voucherID, userID, r.PathValue("ticket"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// putDenyList replaces the deny list (admin).
func (s *Server) putDenyList(w http.ResponseWriter, r *http.Request) {
	if err := s.admin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.Admission == nil {
		s.fail(w, r, errNoAdmission)
		return
	}
	var d admission.DenyList
	err := decodeJSON(w, r, &d)
	if err == nil {
		err = s.denySubjects(r, d.Subjects)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	kept, err := s.Admission.SetDenyList(r.Context(), d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, kept)
}

// denySubjects fills in the buyer ids of the deny list's subjects, the
// identity provider's (issuer, subject) pairs.
func (s *Server) denySubjects(r *http.Request, subjects []admission.DeniedSubject) error {
	if len(subjects) > admission.MaxDeniedUsers {
		return flashsale.Errorf(flashsale.EInvalid, "the deny list holds at most %d users", admission.MaxDeniedUsers)
	}
	for i, d := range subjects {
		id, err := s.Auth.Buyer(r.Context(), d.Issuer, d.Subject)
		switch {
		case errors.Is(err, auth.ErrNoProvider), errors.Is(err, auth.ErrSubject):
			return flashsale.Errorf(flashsale.EInvalid, "subjects[%d]: %v", i, err)
		case err != nil:
			return flashsale.Errorf(flashsale.EUnavailable, "subjects[%d]: the buyer could not be looked up: %v", i, err)
		}
		subjects[i].User = strconv.FormatInt(id, 10)
	}
	return nil
}

// getDenyList shows the deny list (admin).
func (s *Server) getDenyList(w http.ResponseWriter, r *http.Request) {
	if err := s.admin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.Admission == nil {
		s.fail(w, r, errNoAdmission)
		return
	}
	d, err := s.Admission.DenyList(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
