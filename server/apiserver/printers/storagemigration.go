package printers

import (
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	// Upstream's columns: the resource as "resource.group" and the last
	// true one of Running, Succeeded and Failed, else Unknown.
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Resource", "string", "GroupResource to migrate"),
		column("Status", "string", "Status of the migration"),
	}, func(svm *svmv1.StorageVersionMigration, _ time.Time) []interface{} {
		status := "Unknown"
		for _, c := range svm.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				continue
			}
			switch svmv1.MigrationConditionType(c.Type) {
			case svmv1.MigrationRunning, svmv1.MigrationSucceeded, svmv1.MigrationFailed:
				status = c.Type
			}
		}
		return []interface{}{svm.Name, svm.Spec.Resource.String(), status}
	})
}
