package process

import (
	"fmt"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// A panic while reading an event on a goroutine of readAll's own reaches
// its caller, the worker, whose panics River recovers as the attempt's
// error, instead of ending the process.
func TestReadAllPanicReachesTheCaller(t *testing.T) {
	p := &processor{db: &store.DB{Engine: store.SQLite},
		bySource: map[string]payhook.Source{"shop": {Name: "shop", Provider: "stripe"}}}
	evs := make([]*payhook.Event, 4*readersMin)
	for i := range evs {
		if i != 9 { // evs[9] is nil: reading it panics
			evs[i] = &payhook.Event{ID: int64(i + 1), Source: "shop", Type: "ping",
				Payload: fmt.Appendf(nil, `{"id":"evt_%d","type":"ping"}`, i)}
		}
	}
	defer func() {
		v := recover()
		if s, ok := v.(string); !ok || !strings.Contains(s, "nil pointer") {
			t.Fatalf("recovered %v; want the reader's nil pointer panic", v)
		}
	}()
	p.readAll(evs)
	t.Fatal("readAll returned; want its reader's panic")
}
