package job

import (
	"fmt"

	batch "k8s.io/api/batch/v1"
)

// reasonSuccessPolicy is upstream's batch.JobReasonSuccessPolicy: the
// reason of both SuccessCriteriaMet and, later, Complete when a rule of
// spec.successPolicy matched.
const reasonSuccessPolicy = batch.JobReasonSuccessPolicy

// matchSuccessPolicy checks an Indexed Job's successPolicy rules, in
// order, against its succeeded indexes, and returns upstream's message
// naming the first rule satisfied. A rule with succeededIndexes is met once
// all those indexes succeeded, or, with succeededCount too, once that many
// of them did; a rule with only succeededCount once that many indexes
// succeeded anywhere.
func matchSuccessPolicy(policy *batch.SuccessPolicy, completions int32, succeeded intervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		switch {
		case rule.SucceededIndexes != nil:
			required := parseIntervals(*rule.SucceededIndexes, int(completions))
			if len(required) == 0 {
				continue // malformed: validation keeps these out
			}
			n := overlap(required, succeeded)
			if n == required.total() || (rule.SucceededCount != nil && n >= int(*rule.SucceededCount)) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
		case rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount):
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlap counts the indexes in both a and b (each in canonical form).
func overlap(a, b intervals) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if d := min(a[i].last, b[j].last) - max(a[i].first, b[j].first) + 1; d > 0 {
			n += d
		}
		if a[i].last < b[j].last {
			i++
		} else {
			j++
		}
	}
	return n
}
