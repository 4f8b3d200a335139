package grpcserver

import "github.com/jobplane/jobplane/lib/auth"

// AnswersHeld is the bytes of answers s holds unread, of all callers and
// of user's flow (its tenant).
func AnswersHeld(s *Server, user string) (all, users int64) {
	return s.admission.AnswersHeld((&auth.Identity{User: user}).Tenant())
}
