package jobs

// Stopping reports whether Stop was called (its batches then end at the
// event they are on), for the tests of package jobs_test.
func (q *Queue) Stopping() bool { return q.stopping.Load() }
