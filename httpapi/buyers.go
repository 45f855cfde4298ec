package httpapi

import "net/http"

// buyerView is GET /api/buyers/{id}: who a buyer id is, as the shop knows
// the buyer (the user_id of orders and events).
type buyerView struct {
	UserID string `json:"user_id"`
	// Issuer is the identity provider's iss; empty for an HS256 token's
	// buyer (signed with --jwt-secret), whose subject is the id itself.
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// getBuyer answers the admin with who a buyer is: orders and events carry
// a provider's buyer as a number from 2^62, which the shop maps back to
// the subject it knows (to ship to, to email) here.
func (s *Server) getBuyer(w http.ResponseWriter, r *http.Request) {
	if err := s.admin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	issuer, subject, err := s.Auth.Subject(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, buyerView{UserID: formatID(id), Issuer: issuer, Subject: subject})
}
