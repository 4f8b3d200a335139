package grpcserver

import (
	"time"

	"github.com/jobplane/jobplane/lib/auth"
)

// AnswersHeld is the bytes of answers s holds unread, of all callers and
// of user's flow (its tenant).
func AnswersHeld(s *Server, user string) (all, users int64) {
	return s.admission.AnswersHeld((&auth.Identity{User: user}).Tenant())
}

// SetPreemptedStreamGrace sets how long a stream another caller took the
// place of may take to end before its connection is closed.
func SetPreemptedStreamGrace(s *Server, d time.Duration) { s.conns.preemptedStreamGrace = d }
