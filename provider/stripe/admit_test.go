package stripe_test

import (
	"testing"

	"github.com/payhook/payhook/provider/providertest"
)

func TestHeaderCheck(t *testing.T) {
	t.Parallel()
	providertest.RunHeaderCheck(t, suite)
}

func FuzzHeaderCheck(f *testing.F) { providertest.FuzzHeaderCheck(f, suite) }
