package grpcserver

// AnswersHeld is the bytes of answers s holds unread, of all callers and
// of flow.
func AnswersHeld(s *Server, flow string) (all, flows int64) { return s.admission.AnswersHeld(flow) }
