package hmac_test

import (
	"testing"

	"github.com/payhook/payhook/provider/providertest"
)

func TestHeaderCheck(t *testing.T) {
	t.Parallel()
	t.Run("body only", func(t *testing.T) { t.Parallel(); providertest.RunHeaderCheck(t, bodyOnly) })
	t.Run("template", func(t *testing.T) { t.Parallel(); providertest.RunHeaderCheck(t, template) })
}

func FuzzHeaderCheckBodyOnly(f *testing.F) { providertest.FuzzHeaderCheck(f, bodyOnly) }

func FuzzHeaderCheckTemplate(f *testing.F) { providertest.FuzzHeaderCheck(f, template) }
