package dbtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that several goroutines may write to and read
// at once: a server's handlers, its jobs, and logthrottle's period timers,
// which write a log line from a goroutine of their own, up to a period
// after it was logged. The zero value is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
