package validation

import "github.com/kelp-project/kelp/server/cronschedule"

// parseCronSchedule returns nil when spec is a schedule upstream accepts.
func parseCronSchedule(spec string) error {
	_, err := cronschedule.Parse(spec)
	return err
}
