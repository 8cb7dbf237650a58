package defaults

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/utils/ptr"
)

// Upstream's flowcontrol/v1 defaults (pkg/apis/flowcontrol/v1/defaults.go).
const (
	flowSchemaMatchingPrecedence  int32 = 1000
	priorityLevelHandSize         int32 = 8
	priorityLevelQueues           int32 = 64
	priorityLevelQueueLengthLimit int32 = 50
	priorityLevelNominalShares    int32 = 30
)

func FlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = flowSchemaMatchingPrecedence
	}
}

// PriorityLevelConfiguration: a limited level gets 30 nominal shares when
// it names none (an explicit 0 is kept: v1 allows a level with no seats of
// its own), and queuing its hand size, queues and queue length; an exempt
// level's shares and lendable percent are 0.
func PriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To(priorityLevelNominalShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To(int32(0))
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = priorityLevelHandSize
			}
			if q.Queues == 0 {
				q.Queues = priorityLevelQueues
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = priorityLevelQueueLengthLimit
			}
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To(int32(0))
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To(int32(0))
		}
	}
}
