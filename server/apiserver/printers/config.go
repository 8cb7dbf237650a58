package printers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	secretDoc := corev1.Secret{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Type", "string", secretDoc["type"]),
		column("Data", "string", secretDoc["data"]),
		ageColumn(),
	}, func(s *corev1.Secret, now time.Time) []interface{} {
		// stringData is write-only and merged into data on write, so only
		// data is counted.
		return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), age(s.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]),
		ageColumn(),
	}, func(cm *corev1.ConfigMap, now time.Time) []interface{} {
		return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]),
		ageColumn(),
	}, func(sa *corev1.ServiceAccount, now time.Time) []interface{} {
		return []interface{}{sa.Name, int64(len(sa.Secrets)), age(sa.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
		column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
		ageColumn(),
	}, func(q *corev1.ResourceQuota, now time.Time) []interface{} {
		requests, limits := quotaUsage(q)
		return []interface{}{q.Name, requests, limits, age(q.ObjectMeta, now)}
	})
}

// quotaUsage renders "resource: used/hard" for every enforced resource, in
// name order. Resources named "limits.*" go to the Limit column and all
// others (including bare "cpu", "pods", ...) to Request.
func quotaUsage(q *corev1.ResourceQuota) (requests, limits string) {
	names := make([]string, 0, len(q.Status.Hard))
	for name := range q.Status.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)

	var req, lim []string
	for _, name := range names {
		used := q.Status.Used[corev1.ResourceName(name)]
		hard := q.Status.Hard[corev1.ResourceName(name)]
		entry := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if pieces := strings.Split(name, "."); len(pieces) > 1 && pieces[0] == "limits" {
			lim = append(lim, entry)
		} else {
			req = append(req, entry)
		}
	}
	return strings.Join(req, ", "), strings.Join(lim, ", ")
}
