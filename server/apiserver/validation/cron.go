package validation

import (
	"fmt"
	"strings"

	"github.com/robfig/cron/v3"
)

// parseCronSchedule returns nil when spec is a schedule upstream accepts:
// robfig/cron v3's standard grammar, as upstream's validation and the
// CronJob controller (server/controllers/cronjob) parse it. Its errors
// are robfig's texts, which upstream passes through verbatim in
// `spec.schedule: Invalid value: ...`.
func parseCronSchedule(spec string) error {
	// robfig/cron slices up to the first space after a TZ= prefix and
	// panics when there is none.
	if (strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")) && !strings.Contains(spec, " ") {
		return fmt.Errorf("expected a schedule after %s", spec)
	}
	_, err := cron.ParseStandard(spec)
	return err
}
