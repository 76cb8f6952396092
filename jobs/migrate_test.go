package jobs_test

import (
	"context"
	"sync"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// TestMigrateFromSeveralInstancesAtOnce starts the migrations of several
// instances on one fresh database at the same moment, as N payhook serve
// starting together behind a load balancer do: every one must succeed.
// River's migrator alone checks which versions exist and then applies the
// rest without a lock, so without jobs.Migrate's own serialisation all
// but one fail with "relation already exists".
func TestMigrateFromSeveralInstancesAtOnce(t *testing.T) {
	t.Parallel()
	const instances, rounds = 4, 3
	dbtest.EachEngine(t, func(t *testing.T, engine string) {
		for round := range rounds {
			url := dbtest.URL(t, engine)
			ctx := context.Background()
			dbs := make([]*store.DB, instances)
			for i := range dbs {
				db, err := store.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				dbs[i] = db
			}
			errs := make([]error, instances)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, db := range dbs {
				wg.Go(func() {
					<-start
					if _, err := db.Migrate(ctx); err != nil {
						errs[i] = err
						return
					}
					errs[i] = jobs.Migrate(ctx, db)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("round %d, instance %d: %v", round, i, err)
				}
			}
			if err := dbs[0].CheckSchema(ctx); err != nil {
				t.Errorf("round %d: schema after concurrent migrations: %v", round, err)
			}
		}
	})
}
