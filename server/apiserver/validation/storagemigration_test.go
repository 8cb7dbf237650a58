package validation

import (
	"strings"
	"testing"

	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svmWith(rv string, conds ...metav1.Condition) *svmv1.StorageVersionMigration {
	return &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "m", ResourceVersion: "5"},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}},
		Status:     svmv1.StorageVersionMigrationStatus{ResourceVersion: rv, Conditions: conds},
	}
}

func svmCond(t svmv1.MigrationConditionType, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: s, Reason: "R", LastTransitionTime: metav1.Now()}
}

// Upstream's StorageVersionMigration rules: the resource a DNS-1035 label,
// the status resourceVersion well formed and immutable once set, Succeeded
// and Failed never both true nor withdrawn.
func TestStorageVersionMigrationRules(t *testing.T) {
	bad := svmWith("")
	bad.Spec.Resource = metav1.GroupResource{Group: "Not A Group", Resource: "Deployments"}
	if errs := StorageVersionMigration(bad); len(errs) != 2 {
		t.Errorf("bad group and resource: %v", errs)
	}
	if errs := StorageVersionMigration(svmWith("")); len(errs) != 0 {
		t.Errorf("valid: %v", errs)
	}
	cases := []struct {
		name     string
		obj, old *svmv1.StorageVersionMigration
		want     string
	}{
		{"malformed resourceVersion", svmWith("abc"), svmWith(""), "status.resourceVersion"},
		{"resourceVersion changed", svmWith("12"), svmWith("11"), "field is immutable"},
		{"both succeeded and failed", svmWith("1", svmCond(svmv1.MigrationSucceeded, metav1.ConditionTrue), svmCond(svmv1.MigrationFailed, metav1.ConditionTrue)), svmWith("1"),
			"Both success and failed conditions cannot be true at the same time"},
		{"success withdrawn", svmWith("1", svmCond(svmv1.MigrationSucceeded, metav1.ConditionFalse)), svmWith("1", svmCond(svmv1.MigrationSucceeded, metav1.ConditionTrue)),
			"Success condition cannot be set to false once it is true"},
		{"failure withdrawn", svmWith("1"), svmWith("1", svmCond(svmv1.MigrationFailed, metav1.ConditionTrue)),
			"Failed condition cannot be set to false once it is true"},
		{"checkpoint set and running", svmWith("7", svmCond(svmv1.MigrationRunning, metav1.ConditionTrue)), svmWith(""), ""},
	}
	for _, tc := range cases {
		errs := StorageVersionMigrationStatusUpdate(tc.obj, tc.old)
		if tc.want == "" {
			if len(errs) != 0 {
				t.Errorf("%s: %v", tc.name, errs)
			}
			continue
		}
		if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, errs, tc.want)
		}
	}
	changed := svmWith("")
	changed.Spec.Resource.Resource = "replicasets"
	if errs := StorageVersionMigrationUpdate(changed, svmWith("")); !strings.Contains(errs.ToAggregate().Error(), "field is immutable") {
		t.Errorf("spec change: %v", errs)
	}
}
