package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// Targets of issue 15 for custom resources.
const (
	// targetCRDCreateRatio bounds the custom-object create p99 (schema
	// validation, CEL, defaulting, pruning, JSON storage) against the
	// ConfigMap create p99 of the same run.
	targetCRDCreateRatio = 1.2
	// targetCRDIdleMiB bounds what 100 CRDs add to an idle server's RSS.
	targetCRDIdleMiB = 20
	crdRounds        = 4   // rounds of both sides at once
	idleCRDs         = 100 // CRDs on the loaded side of BenchmarkCRDIdleRSS
	// crdIdleWait is how long BenchmarkCRDIdleRSS leaves both servers
	// before reading their RSS: past the minute after which a custom
	// kind's write path (validators, CEL programs, apply schema) is let go
	// (registry/customwrite.go), as it is on an idle node.
	crdIdleWait = 90 * time.Second
	// crdIdleSamples RSS readings, crdIdleEvery apart from crdIdleWait on,
	// are averaged: an idle Go process's RSS moves by a few MiB between
	// its garbage collections (what it allocated since the last one), so
	// one reading of each server made the difference swing by 3 MiB from
	// run to run.
	crdIdleSamples = 7
	crdIdleEvery   = 5 * time.Second
)

// benchCRD is a CRD as operators ship them: a typed spec with a pattern,
// an enum, bounds, a default and a nested list, two CEL rules (one on
// the list, so its cost estimate is non-trivial), status and scale.
func benchCRD(group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	str := func(max int64) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To(max)}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
				},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {
							Type:     "object",
							Required: []string{"index", "payload"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"index":    {Type: "string", Pattern: "^[0-9]+$", MaxLength: ptr.To[int64](8)},
								"payload":  str(1024),
								"replicas": {Type: "integer", Minimum: ptr.To[float64](0), Maximum: ptr.To[float64](100), Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
								"tier":     {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"gold"`)}, {Raw: []byte(`"silver"`)}}, Default: &apiextensionsv1.JSON{Raw: []byte(`"silver"`)}},
								"ports": {Type: "array", MaxItems: ptr.To[int64](8), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
									Type: "object", Required: []string{"port"},
									Properties: map[string]apiextensionsv1.JSONSchemaProps{
										"name": str(15),
										"port": {Type: "integer", Minimum: ptr.To[float64](1), Maximum: ptr.To[float64](65535)},
									},
								}}},
							},
							XValidations: apiextensionsv1.ValidationRules{
								{Rule: "self.replicas <= 50 || self.tier == 'gold'", Message: "more than 50 replicas need the gold tier"},
								{Rule: "!has(self.ports) || self.ports.all(p, p.port != 22)", Message: "port 22 is reserved"},
							},
						},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
}

// benchObject is the custom-object twin of configMap(i): the same name,
// label and payload, plus two ports for the list rule to walk.
func benchObject(apiVersion, kind string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]interface{}{"name": fmt.Sprintf("cm-%04d", i), "labels": map[string]interface{}{"app": "bench"}},
		"spec": map[string]interface{}{"index": strconv.Itoa(i), "payload": payload,
			"ports": []interface{}{map[string]interface{}{"name": "http", "port": int64(80)}, map[string]interface{}{"name": "https", "port": int64(443)}}},
	}}
}

func createCRDsEstablished(ctx context.Context, b *testing.B, s *server, crds ...*apiextensionsv1.CustomResourceDefinition) {
	b.Helper()
	c, err := apiextensionsclient.NewForConfig(s.config)
	if err != nil {
		b.Fatal(err)
	}
	for _, crd := range crds {
		if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			b.Fatalf("creating CRD %s: %v", crd.Name, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		established := 0
		for _, crd := range list.Items {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established++
				}
			}
		}
		if established == len(crds) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d CRDs Established after 60 s", established, len(crds))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkCustomObjectCreate compares the create latency of custom
// objects (benchCRD: schema validation, two CEL rules, defaulting,
// pruning, JSON storage) with that of ConfigMaps of the same size, side by
// side on one server: in each of crdRounds rounds both create cmCount
// objects into fresh namespaces at the same time, each side with
// cmConcurrency/2 clients, so both share whatever else the machine is
// doing. It reports both p99s and their ratio (issue 15: <= 1.2).
func BenchmarkCustomObjectCreate(b *testing.B) {
	s := startServer(b)
	cs := s.client()
	ctx := ctxFor(b, 30*time.Minute)
	warmUp(ctx, b, cs)
	createCRDsEstablished(ctx, b, s, benchCRD("bench.kelp.test", "gadgets", "Gadget"))
	dyn, err := dynamic.NewForConfig(s.config)
	if err != nil {
		b.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "bench.kelp.test", Version: "v1", Resource: "gadgets"}

	run := 0
	newNS := func() string {
		ns := fmt.Sprintf("bench-crd-%d", run)
		run++
		createNamespace(ctx, b, cs, ns)
		return ns
	}
	createCMs := func(ns string, conc int) ([]time.Duration, time.Duration) {
		cms := cs.CoreV1().ConfigMaps(ns)
		lat, wall, err := parallel(cmCount, conc, func(i int) error {
			_, err := cms.Create(ctx, configMap(i), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatalf("ConfigMap create in %s: %v", ns, err)
		}
		return lat, wall
	}
	createObjects := func(ns string, conc int) ([]time.Duration, time.Duration) {
		res := dyn.Resource(gvr).Namespace(ns)
		lat, wall, err := parallel(cmCount, conc, func(i int) error {
			got, err := res.Create(ctx, benchObject("bench.kelp.test/v1", "Gadget", i), metav1.CreateOptions{})
			// The defaults prove the schema path ran on every create.
			if err == nil && got.Object["spec"].(map[string]interface{})["tier"] != "silver" {
				err = fmt.Errorf("%s: spec.tier not defaulted: %v", got.GetName(), got.Object["spec"])
			}
			return err
		})
		if err != nil {
			b.Fatalf("custom object create in %s: %v", ns, err)
		}
		return lat, wall
	}
	// Warm the custom resource's path (its managedFields type converter is
	// built on the first write; CEL programs are compiled with the CRD).
	createObjects(newNS(), cmConcurrency)
	// And a CEL rule refuses what it should, so the rules are live.
	bad := benchObject("bench.kelp.test/v1", "Gadget", 0)
	bad.Object["spec"].(map[string]interface{})["replicas"] = int64(60)
	if _, err := dyn.Resource(gvr).Namespace("bench-warmup").Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		b.Fatalf("a custom object breaking a CEL rule was created")
	}

	var cmLat, crLat []time.Duration
	var cmWall, crWall time.Duration
	b.ResetTimer()
	done := measure(b, s.pid())
	for range b.N {
		for range crdRounds {
			nsC, nsR := newNS(), newNS()
			var wg sync.WaitGroup
			var lc, lr []time.Duration
			var wc, wr time.Duration
			wg.Add(2)
			go func() { defer wg.Done(); lc, wc = createCMs(nsC, cmConcurrency/2) }()
			go func() { defer wg.Done(); lr, wr = createObjects(nsR, cmConcurrency/2) }()
			wg.Wait()
			cmLat, cmWall = append(cmLat, lc...), cmWall+wc
			crLat, crWall = append(crLat, lr...), crWall+wr
		}
	}
	b.StopTimer()
	done(len(cmLat) + len(crLat))
	c, r := Summarize(cmLat), Summarize(crLat)
	ratio := float64(r.P99) / float64(c.P99)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(Ms(c.P99), "configmap-p99-ms")
	b.ReportMetric(Ms(r.P99), "custom-p99-ms")
	b.ReportMetric(Ms(c.P50), "configmap-p50-ms")
	b.ReportMetric(Ms(r.P50), "custom-p50-ms")
	b.ReportMetric(ratio, "p99-ratio")
	b.Logf("create (%d x %d rounds, both sides at once, concurrency %d each): ConfigMaps %s, %.0f/s; custom objects (schema + 2 CEL rules + defaults) %s, %.0f/s; p99 ratio %.3f | target <= %.1f: %s",
		cmCount, crdRounds*b.N, cmConcurrency/2, c, float64(c.N)/cmWall.Seconds(), r, float64(r.N)/crWall.Seconds(),
		ratio, targetCRDCreateRatio, verdict(ratio <= targetCRDCreateRatio))
}

// BenchmarkCRDIdleRSS starts two servers at once, creates idleCRDs CRDs
// (benchCRD, each its own kind, spread over 10 groups) on one of them and
// none on the other, leaves both idle for crdIdleWait and reports the
// VmRSS of each, averaged over crdIdleSamples readings, and the
// difference (issue 15: <= +20 MiB). Both idle over the same window, so
// the machine's state weighs on both alike.
func BenchmarkCRDIdleRSS(b *testing.B) {
	none, loaded := startServer(b), startServer(b)
	ctx := ctxFor(b, 10*time.Minute)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range idleCRDs {
		crds = append(crds, benchCRD(fmt.Sprintf("g%d.bench.kelp.test", i%10), "things"+strconv.Itoa(i), "Thing"+strconv.Itoa(i)))
	}
	start := time.Now()
	createCRDsEstablished(ctx, b, loaded, crds...)
	b.Logf("%d CRDs Established in %v", idleCRDs, time.Since(start).Round(time.Millisecond))
	// One object of each served kind, so each CRD's store and watch cache
	// hold something, as in a cluster that uses its CRDs.
	dyn, err := dynamic.NewForConfig(loaded.config)
	if err != nil {
		b.Fatal(err)
	}
	for i := range idleCRDs {
		gvr := schema.GroupVersionResource{Group: fmt.Sprintf("g%d.bench.kelp.test", i%10), Version: "v1", Resource: "things" + strconv.Itoa(i)}
		if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, benchObject(gvr.GroupVersion().String(), "Thing"+strconv.Itoa(i), i), metav1.CreateOptions{}); err != nil {
			b.Fatalf("creating a %s: %v", gvr.Resource, err)
		}
	}
	time.Sleep(crdIdleWait)
	// The split says what differs: anonymous memory (heap, stacks) or
	// the executable's pages each has faulted in.
	type reading struct{ rss, anon, file float64 }
	rss := func(s *server) reading {
		st, err := procStatus(s.pid(), "VmRSS", "RssAnon", "RssFile")
		if err != nil {
			b.Fatal(err)
		}
		return reading{float64(st["VmRSS"]) / (1 << 20), float64(st["RssAnon"]) / (1 << 20), float64(st["RssFile"]) / (1 << 20)}
	}
	var sums [2]reading
	var deltas []float64
	for i := range crdIdleSamples {
		if i > 0 {
			time.Sleep(crdIdleEvery)
		}
		readings := [2]reading{rss(none), rss(loaded)}
		for j, r := range readings {
			sums[j].rss, sums[j].anon, sums[j].file = sums[j].rss+r.rss, sums[j].anon+r.anon, sums[j].file+r.file
		}
		deltas = append(deltas, readings[1].rss-readings[0].rss)
	}
	for j, s := range []*server{none, loaded} {
		n := float64(crdIdleSamples)
		b.Logf("%s: RSS %.1f MiB (anon %.1f, file %.1f), the mean of %d readings", s.dataDir, sums[j].rss/n, sums[j].anon/n, sums[j].file/n, crdIdleSamples)
	}
	b.Logf("the difference at each reading: %.1f MiB", deltas)
	a, l := sums[0].rss/crdIdleSamples, sums[1].rss/crdIdleSamples
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(a, "rss-none-MiB")
	b.ReportMetric(l, "rss-100crds-MiB")
	b.ReportMetric(l-a, "rss-delta-MiB")
	b.Logf("idle RSS %v–%v after the last write: no CRDs %.1f MiB, %d CRDs (one object each) %.1f MiB, +%.1f MiB | target <= +%d MiB: %s",
		crdIdleWait, crdIdleWait+(crdIdleSamples-1)*crdIdleEvery, a, idleCRDs, l, l-a, targetCRDIdleMiB, verdict(l-a <= targetCRDIdleMiB))
}
