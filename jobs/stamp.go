package jobs

import "time"

// stampClock is Config.Now as River's time generator. NowOrNil never
// returns nil, so River passes Now to every query that would otherwise
// read the database's clock (see Config.StampWithNow).
type stampClock func() time.Time

func (c stampClock) Now() time.Time { return c() }

func (c stampClock) NowOrNil() *time.Time {
	t := c()
	return &t
}
