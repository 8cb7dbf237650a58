// Package cronschedule reads a CronJob schedule the one way both API
// validation and the CronJob controller read it: robfig/cron v3's
// standard grammar (five fields, @hourly..., @every 1h30m, an optional
// TZ=/CRON_TZ= prefix), as upstream. Its errors are robfig's texts, which
// upstream passes through verbatim in `spec.schedule: Invalid value: ...`.
package cronschedule

import (
	"fmt"
	"strings"

	"github.com/robfig/cron/v3"
)

// Parse parses spec. It never panics: robfig/cron slices up to the first
// space after a TZ= prefix and panics when there is none.
func Parse(spec string) (cron.Schedule, error) {
	if (strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")) && !strings.Contains(spec, " ") {
		return nil, fmt.Errorf("expected a schedule after %s", spec)
	}
	return cron.ParseStandard(spec)
}
