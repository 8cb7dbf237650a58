package printers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Status has no name, so unlike every other table this one has no Name
// column.
func init() {
	statusDoc := metav1.Status{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		column("Status", "string", statusDoc["status"]),
		column("Reason", "string", statusDoc["reason"]),
		column("Message", "string", statusDoc["message"]),
	}, func(s *metav1.Status, _ time.Time) []interface{} {
		return []interface{}{s.Status, string(s.Reason), s.Message}
	})
}
