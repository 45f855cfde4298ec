package async

import (
	"testing"
	"time"
)

// TestSoldOutReplyAfterAReturnNoticeIsNotRemembered: a sold-out reply to
// a gate call sent before a return notice, decoded after it, does not
// make the instance refuse the returned unit for VerdictTTL (issue 32).
// Both orders of the race are checked: the notice before the reply is
// decoded, and while it is remembered.
func TestSoldOutReplyAfterAReturnNoticeIsNotRemembered(t *testing.T) {
	s := &Service{}
	l := &local{}
	s.locals.Store(int64(7), l)
	notices := l.notices.Load() // the call is sent
	s.forgetSoldOut(7)          // a return, announced
	l.rememberSoldOut(time.Minute, notices)
	if err := l.refusal(); err != nil {
		t.Fatalf("refusal after a return notice: %v; want none", err)
	}
	l.rememberSoldOut(time.Minute, l.notices.Load())
	if l.refusal() == nil {
		t.Fatal("a sell-out with no notice since is not remembered")
	}
	s.forgetSoldOut(7)
	if err := l.refusal(); err != nil {
		t.Fatalf("refusal after a return notice: %v; want none", err)
	}
}
