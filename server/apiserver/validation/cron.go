package validation

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file is a validation-only implementation of the standard cron
// grammar upstream accepts for CronJob schedules (robfig/cron v3's
// ParseStandard), written here because that module is not a kelp
// dependency. It reports the same error texts, which upstream passes
// through verbatim in `spec.schedule: Invalid value: ...`.
//
// Grammar:
//   [CRON_TZ=<zone> | TZ=<zone>] <minute> <hour> <day-of-month> <month> <day-of-week>
//   [CRON_TZ=<zone> | TZ=<zone>] @yearly|@annually|@monthly|@weekly|@daily|@midnight|@hourly
//   [CRON_TZ=<zone> | TZ=<zone>] @every <Go duration>
// Each field is a comma list of `*`, `?`, `N`, `N-M`, each optionally with
// `/step`; months and weekdays also accept three-letter names (jan, mon).

type cronBounds struct {
	min, max uint
	names    map[string]uint
}

var (
	cronMinutes = cronBounds{0, 59, nil}
	cronHours   = cronBounds{0, 23, nil}
	cronDom     = cronBounds{1, 31, nil}
	cronMonths  = cronBounds{1, 12, map[string]uint{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	cronDow = cronBounds{0, 6, map[string]uint{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
	cronDescriptors = map[string]bool{
		"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
		"@daily": true, "@midnight": true, "@hourly": true,
	}
)

// parseCronSchedule returns nil when spec is a valid standard schedule.
func parseCronSchedule(spec string) error {
	if len(spec) == 0 {
		return fmt.Errorf("empty spec string")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		i := strings.Index(spec, " ")
		eq := strings.Index(spec, "=")
		if i < 0 {
			i = len(spec)
		}
		zone := spec[eq+1 : i]
		if _, err := time.LoadLocation(zone); err != nil {
			return fmt.Errorf("provided bad location %s: %v", zone, err)
		}
		spec = strings.TrimSpace(spec[i:])
	}
	if strings.HasPrefix(spec, "@") {
		if cronDescriptors[spec] {
			return nil
		}
		const every = "@every "
		if strings.HasPrefix(spec, every) {
			if _, err := time.ParseDuration(spec[len(every):]); err != nil {
				return fmt.Errorf("failed to parse duration %s: %s", spec, err)
			}
			return nil
		}
		return fmt.Errorf("unrecognized descriptor: %s", spec)
	}
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return fmt.Errorf("expected exactly 5 fields, found %d: %s", len(fields), fields)
	}
	for i, b := range []cronBounds{cronMinutes, cronHours, cronDom, cronMonths, cronDow} {
		for _, expr := range strings.FieldsFunc(fields[i], func(r rune) bool { return r == ',' }) {
			if err := parseCronRange(expr, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func parseCronRange(expr string, b cronBounds) error {
	rangeAndStep := strings.Split(expr, "/")
	lowAndHigh := strings.Split(rangeAndStep[0], "-")
	singleDigit := len(lowAndHigh) == 1
	var start, end, step uint
	var err error
	if lowAndHigh[0] == "*" || lowAndHigh[0] == "?" {
		start, end = b.min, b.max
	} else {
		if start, err = parseCronIntOrName(lowAndHigh[0], b.names); err != nil {
			return err
		}
		switch len(lowAndHigh) {
		case 1:
			end = start
		case 2:
			if end, err = parseCronIntOrName(lowAndHigh[1], b.names); err != nil {
				return err
			}
		default:
			return fmt.Errorf("too many hyphens: %s", expr)
		}
	}
	switch len(rangeAndStep) {
	case 1:
		step = 1
	case 2:
		if step, err = parseCronInt(rangeAndStep[1]); err != nil {
			return err
		}
		// "N/step" means "N-max/step".
		if singleDigit {
			end = b.max
		}
	default:
		return fmt.Errorf("too many slashes: %s", expr)
	}
	if start < b.min {
		return fmt.Errorf("beginning of range (%d) below minimum (%d): %s", start, b.min, expr)
	}
	if end > b.max {
		return fmt.Errorf("end of range (%d) above maximum (%d): %s", end, b.max, expr)
	}
	if start > end {
		return fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", start, end, expr)
	}
	if step == 0 {
		return fmt.Errorf("step of range should be a positive number: %s", expr)
	}
	return nil
}

func parseCronIntOrName(expr string, names map[string]uint) (uint, error) {
	if names != nil {
		if v, ok := names[strings.ToLower(expr)]; ok {
			return v, nil
		}
	}
	return parseCronInt(expr)
}

func parseCronInt(expr string) (uint, error) {
	n, err := strconv.Atoi(expr)
	if err != nil {
		return 0, fmt.Errorf("failed to parse int from %s: %s", expr, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, expr)
	}
	return uint(n), nil
}
