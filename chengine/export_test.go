package chengine

// ClosePipe closes the parent's end of the child's stdin without killing
// the child, to test that the child then ends itself.
func ClosePipe(s *Server) error { return s.parentEnd.Close() }

// Exited reports whether s's engine has exited.
func Exited(s *Server) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
