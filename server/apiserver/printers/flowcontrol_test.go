package printers

import (
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestFlowSchemaRows(t *testing.T) {
	fs := func(name string, precedence int32) flowcontrolv1.FlowSchema {
		return flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(time.Hour)},
			Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: precedence,
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"}},
		}
	}
	dangling := fs("mine", 500)
	dangling.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType}
	dangling.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue}}
	assertCells(t, cellsOf(t, &dangling), []interface{}{"mine", "workload-low", int64(500), "ByUser", "60m", "True"})

	// Without the condition (not looked at yet) MissingPL is "?"; a list is
	// in matching order: precedence, then name.
	list := &flowcontrolv1.FlowSchemaList{Items: []flowcontrolv1.FlowSchema{fs("b", 9000), fs("z", 100), fs("a", 9000)}}
	table := mustTable(t, list)
	var names []interface{}
	for _, r := range table.Rows {
		names = append(names, r.Cells[0])
	}
	assertCells(t, names, []interface{}{"z", "a", "b"})
	assertCells(t, table.Rows[0].Cells[3:], []interface{}{"<none>", "60m", "?"})
	if list.Items[0].Name != "b" {
		t.Errorf("the list itself was reordered: %s first", list.Items[0].Name)
	}
}

func TestPriorityLevelConfigurationRows(t *testing.T) {
	queued := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-high", CreationTimestamp: ago(time.Hour)},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To(int32(40)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 128, HandSize: 6, QueueLengthLimit: 50}}}},
	}
	assertCells(t, cellsOf(t, queued), []interface{}{"workload-high", "Limited", int64(40), int64(128), int64(6), int64(50), "60m"})
	exempt := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "exempt", CreationTimestamp: ago(time.Hour)},
		Spec:       flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt},
	}
	assertCells(t, cellsOf(t, exempt), []interface{}{"exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "60m"})
}
