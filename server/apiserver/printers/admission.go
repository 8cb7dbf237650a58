package printers

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	webhookColumns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
		ageColumn(),
	}
	cells(webhookColumns, func(c *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.ObjectMeta, now)}
	})
	cells(webhookColumns, func(c *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.ObjectMeta, now)}
	})
}
