package printers

import (
	"k8s.io/utils/ptr"
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kelp-project/kelp/server/apiserver/conversion"
)

// now is fixed so AGE and "(Xm ago)" cells are deterministic.
var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func agoPtr(d time.Duration) *metav1.Time { t := ago(d); return &t }

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(5 * time.Minute)}
}

// mustTable converts obj and checks the invariants every table must hold:
// each row has exactly one cell per column and carries the object it shows.
func mustTable(t *testing.T, obj runtime.Object) *metav1.Table {
	t.Helper()
	table, err := TableFor(obj, now)
	if err != nil {
		t.Fatalf("TableFor(%T): %v", obj, err)
	}
	for i, row := range table.Rows {
		if len(row.Cells) != len(table.ColumnDefinitions) {
			t.Fatalf("%T row %d: %d cells for %d columns: %#v", obj, i, len(row.Cells), len(table.ColumnDefinitions), row.Cells)
		}
		if row.Object.Object == nil {
			t.Fatalf("%T row %d: Row.Object not set", obj, i)
		}
	}
	return table
}

// cellsOf returns the cells of the only row of obj's table.
func cellsOf(t *testing.T, obj runtime.Object) []interface{} {
	t.Helper()
	table := mustTable(t, obj)
	if len(table.Rows) != 1 {
		t.Fatalf("%T: got %d rows, want 1", obj, len(table.Rows))
	}
	return table.Rows[0].Cells
}

// cellByColumn returns the named cells of obj's only row, so a test can
// assert the cells it cares about without restating every column.
func cellByColumn(t *testing.T, obj runtime.Object) map[string]interface{} {
	t.Helper()
	table := mustTable(t, obj)
	if len(table.Rows) != 1 {
		t.Fatalf("%T: got %d rows, want 1", obj, len(table.Rows))
	}
	out := map[string]interface{}{}
	for i, c := range table.ColumnDefinitions {
		out[c.Name] = table.Rows[0].Cells[i]
	}
	return out
}

func assertCells(t *testing.T, got, want []interface{}) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cells mismatch\n got: %#v\nwant: %#v", got, want)
	}
}

func assertColumn(t *testing.T, cells map[string]interface{}, column string, want interface{}) {
	t.Helper()
	got, ok := cells[column]
	if !ok {
		t.Fatalf("no column %q in %v", column, cells)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", column, got, want)
	}
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Minute)}}
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func terminated(reason string, exitCode, signal int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode, Signal: signal}}
}

func status(name string, state corev1.ContainerState, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: state, Ready: ready}
}

// newPod builds a pod with the given regular and init containers (by name).
func newPod(phase corev1.PodPhase, containers []string, initContainers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: objMeta("web"), Status: corev1.PodStatus{Phase: phase}}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: n + ":1"})
	}
	for _, n := range initContainers {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n, Image: n + ":1"})
	}
	return p
}

func withStatuses(p *corev1.Pod, statuses ...corev1.ContainerStatus) *corev1.Pod {
	p.Status.ContainerStatuses = statuses
	return p
}

func withInitStatuses(p *corev1.Pod, statuses ...corev1.ContainerStatus) *corev1.Pod {
	p.Status.InitContainerStatuses = statuses
	return p
}

func withCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
	return p
}

func deleting(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = agoPtr(10 * time.Second)
	return p
}

func sidecar(p *corev1.Pod, name string) *corev1.Pod {
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == name {
			p.Spec.InitContainers[i].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
	}
	return p
}

func TestPodReadyStatusRestarts(t *testing.T) {
	one := []string{"app"}
	two := []string{"app", "log"}

	crashLoop := status("app", waiting("CrashLoopBackOff"), false)
	crashLoop.RestartCount = 5
	crashLoop.LastTerminationState = terminated("Error", 1, 0)
	crashLoop.LastTerminationState.Terminated.FinishedAt = ago(2*time.Minute + 3*time.Second)

	restartedNoTime := status("app", running(), true)
	restartedNoTime.RestartCount = 2

	// An init container that restarted before succeeding: its restarts stop
	// counting once the pod is initialized.
	flakyInit := status("init", terminated("Completed", 0, 0), false)
	flakyInit.RestartCount = 4
	flakyInit.LastTerminationState = terminated("Error", 1, 0)
	flakyInit.LastTerminationState.Terminated.FinishedAt = ago(time.Minute)

	sidecarStatus := status("proxy", running(), true)
	sidecarStatus.Started = ptr.To(true)
	sidecarStatus.RestartCount = 1
	sidecarStatus.LastTerminationState = terminated("Error", 1, 0)
	sidecarStatus.LastTerminationState.Terminated.FinishedAt = ago(30 * time.Second)

	tests := []struct {
		name     string
		pod      *corev1.Pod
		ready    string
		status   string
		restarts string
	}{
		{"pending, nothing reported", newPod(corev1.PodPending, one), "0/1", "Pending", "0"},
		{"container creating",
			withStatuses(newPod(corev1.PodPending, one), status("app", waiting("ContainerCreating"), false)),
			"0/1", "ContainerCreating", "0"},
		{"running",
			withStatuses(newPod(corev1.PodRunning, two), status("app", running(), true), status("log", running(), true)),
			"2/2", "Running", "0"},
		{"running but one container not ready",
			withStatuses(newPod(corev1.PodRunning, two), status("app", running(), true), status("log", running(), false)),
			"1/2", "Running", "0"},
		{"completed",
			withStatuses(newPod(corev1.PodSucceeded, one), status("app", terminated("Completed", 0, 0), false)),
			"0/1", "Completed", "0"},
		{"crash loop shows last restart age",
			withStatuses(newPod(corev1.PodRunning, one), crashLoop),
			"0/1", "CrashLoopBackOff", "5 (2m3s ago)"},
		{"restarts without a recorded termination have no age",
			withStatuses(newPod(corev1.PodRunning, one), restartedNoTime),
			"1/1", "Running", "2"},
		{"image pull backoff",
			withStatuses(newPod(corev1.PodPending, one), status("app", waiting("ImagePullBackOff"), false)),
			"0/1", "ImagePullBackOff", "0"},
		{"err image pull",
			withStatuses(newPod(corev1.PodPending, one), status("app", waiting("ErrImagePull"), false)),
			"0/1", "ErrImagePull", "0"},
		{"oom killed",
			withStatuses(newPod(corev1.PodFailed, one), status("app", terminated("OOMKilled", 137, 0), false)),
			"0/1", "OOMKilled", "0"},
		{"error",
			withStatuses(newPod(corev1.PodFailed, one), status("app", terminated("Error", 1, 0), false)),
			"0/1", "Error", "0"},
		{"terminated without reason shows signal",
			withStatuses(newPod(corev1.PodFailed, one), status("app", terminated("", 137, 9), false)),
			"0/1", "Signal:9", "0"},
		{"terminated without reason or signal shows exit code",
			withStatuses(newPod(corev1.PodFailed, one), status("app", terminated("", 2, 0), false)),
			"0/1", "ExitCode:2", "0"},
		{"first container's reason wins",
			withStatuses(newPod(corev1.PodPending, two), status("app", waiting("ImagePullBackOff"), false), status("log", waiting("ContainerCreating"), false)),
			"0/2", "ImagePullBackOff", "0"},
		{"completed container beside a running one, pod ready",
			withCondition(withStatuses(newPod(corev1.PodRunning, two), status("app", terminated("Completed", 0, 0), false), status("log", running(), true)), corev1.PodReady, corev1.ConditionTrue),
			"1/2", "Running", "0"},
		{"completed container beside a running one, pod not ready",
			withCondition(withStatuses(newPod(corev1.PodRunning, two), status("app", terminated("Completed", 0, 0), false), status("log", running(), true)), corev1.PodReady, corev1.ConditionFalse),
			"1/2", "NotReady", "0"},
		{"terminating",
			deleting(withStatuses(newPod(corev1.PodRunning, one), status("app", running(), true))),
			"1/1", "Terminating", "0"},
		{"finished pod being deleted keeps its outcome",
			deleting(withStatuses(newPod(corev1.PodSucceeded, one), status("app", terminated("Completed", 0, 0), false))),
			"0/1", "Completed", "0"},
		{"node lost",
			func() *corev1.Pod {
				p := deleting(withStatuses(newPod(corev1.PodRunning, one), status("app", running(), true)))
				p.Status.Reason = "NodeLost"
				return p
			}(),
			"1/1", "Unknown", "0"},
		{"status reason overrides phase",
			func() *corev1.Pod {
				p := newPod(corev1.PodFailed, one)
				p.Status.Reason = "Evicted"
				return p
			}(),
			"0/1", "Evicted", "0"},
		{"scheduling gated",
			func() *corev1.Pod {
				p := newPod(corev1.PodPending, one)
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
				return p
			}(),
			"0/1", "SchedulingGated", "0"},
		{"first of two init containers running",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a", "init-b"),
				status("init-a", running(), false), status("init-b", waiting("PodInitializing"), false)),
			"0/1", "Init:0/2", "0"},
		{"second init container running",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a", "init-b"),
				status("init-a", terminated("Completed", 0, 0), false), status("init-b", running(), false)),
			"0/1", "Init:1/2", "0"},
		{"init container waiting with PodInitializing counts as progress",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a", "init-b"),
				status("init-a", waiting("PodInitializing"), false)),
			"0/1", "Init:0/2", "0"},
		{"init container crash looping",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a"), status("init-a", waiting("CrashLoopBackOff"), false)),
			"0/1", "Init:CrashLoopBackOff", "0"},
		{"init container failed",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a"), status("init-a", terminated("Error", 1, 0), false)),
			"0/1", "Init:Error", "0"},
		{"init container failed without reason",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a"), status("init-a", terminated("", 3, 0), false)),
			"0/1", "Init:ExitCode:3", "0"},
		{"init container killed by signal",
			withInitStatuses(newPod(corev1.PodPending, one, "init-a"), status("init-a", terminated("", 137, 9), false)),
			"0/1", "Init:Signal:9", "0"},
		{"init container restarts count only while initializing",
			withStatuses(withInitStatuses(newPod(corev1.PodRunning, one, "init"), flakyInit), status("app", running(), true)),
			"1/1", "Running", "0"},
		{"init container restarts shown while initializing",
			withInitStatuses(newPod(corev1.PodPending, one, "init"), func() corev1.ContainerStatus {
				s := flakyInit
				s.State = waiting("CrashLoopBackOff")
				return s
			}()),
			"0/1", "Init:CrashLoopBackOff", "4 (60s ago)"},
		{"sidecar counts toward ready and restarts",
			withStatuses(withInitStatuses(sidecar(newPod(corev1.PodRunning, one, "proxy"), "proxy"), sidecarStatus), status("app", running(), true)),
			"2/2", "Running", "1 (30s ago)"},
		{"sidecar not yet started blocks initialization",
			withInitStatuses(sidecar(newPod(corev1.PodPending, one, "proxy"), "proxy"), status("proxy", waiting("ContainerCreating"), false)),
			"0/2", "Init:ContainerCreating", "0"},
		// Init statuses can lag behind (e.g. after a kubelet restart) while
		// the Initialized condition is already true: the regular containers
		// still get counted and can override the Init:* status...
		{"initialized pod judged by its containers",
			withCondition(withStatuses(withInitStatuses(newPod(corev1.PodRunning, one, "init"), status("init", waiting("PodInitializing"), false)),
				status("app", waiting("CrashLoopBackOff"), false)), corev1.PodInitialized, corev1.ConditionTrue),
			"0/1", "CrashLoopBackOff", "0"},
		// ...but a healthy running container leaves the Init:* status in
		// place, exactly as upstream prints it.
		{"initialized pod with running container keeps init status",
			withCondition(withStatuses(withInitStatuses(newPod(corev1.PodRunning, one, "init"), status("init", waiting("PodInitializing"), false)),
				status("app", running(), true)), corev1.PodInitialized, corev1.ConditionTrue),
			"1/1", "Init:0/1", "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cellByColumn(t, tc.pod)
			assertColumn(t, c, "Ready", tc.ready)
			assertColumn(t, c, "Status", tc.status)
			assertColumn(t, c, "Restarts", tc.restarts)
			assertColumn(t, c, "Name", "web")
			assertColumn(t, c, "Age", "5m")
		})
	}
}

func TestPodRowConditions(t *testing.T) {
	tests := []struct {
		phase corev1.PodPhase
		want  []metav1.TableRowCondition
	}{
		{corev1.PodRunning, nil},
		{corev1.PodSucceeded, []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "The pod has completed successfully."}}},
		{corev1.PodFailed, []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}}},
	}
	for _, tc := range tests {
		table := mustTable(t, newPod(tc.phase, []string{"app"}))
		if got := table.Rows[0].Conditions; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: conditions = %#v, want %#v", tc.phase, got, tc.want)
		}
	}
}

func TestPodWideCells(t *testing.T) {
	p := withStatuses(newPod(corev1.PodRunning, []string{"app"}), status("app", running(), true))
	p.Spec.NodeName = "node-1"
	p.Status.NominatedNodeName = "node-2"
	p.Status.PodIP = "10.0.0.9"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}}
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: "example.com/lb", Status: corev1.ConditionTrue},
		{Type: "example.com/dns", Status: corev1.ConditionFalse},
	}
	assertCells(t, cellsOf(t, p)[5:], []interface{}{"10.0.0.7", "node-1", "node-2", "1/2"})

	bare := newPod(corev1.PodPending, []string{"app"})
	assertCells(t, cellsOf(t, bare)[5:], []interface{}{"<none>", "<none>", "<none>", "<none>"})

	// An object that skipped defaulting only has the singular podIP.
	legacy := newPod(corev1.PodRunning, []string{"app"})
	legacy.Status.PodIP = "10.0.0.8"
	assertColumn(t, cellByColumn(t, legacy), "IP", "10.0.0.8")
}

func TestPodColumns(t *testing.T) {
	table := mustTable(t, &corev1.PodList{})
	want := []struct {
		name, typ string
		priority  int32
	}{
		{"Name", "string", 0}, {"Ready", "string", 0}, {"Status", "string", 0}, {"Restarts", "string", 0}, {"Age", "string", 0},
		{"IP", "string", 1}, {"Node", "string", 1}, {"Nominated Node", "string", 1}, {"Readiness Gates", "string", 1},
	}
	if len(table.ColumnDefinitions) != len(want) {
		t.Fatalf("got %d columns, want %d", len(table.ColumnDefinitions), len(want))
	}
	for i, w := range want {
		c := table.ColumnDefinitions[i]
		if c.Name != w.name || c.Type != w.typ || c.Priority != w.priority {
			t.Errorf("column %d = %s/%s/%d, want %s/%s/%d", i, c.Name, c.Type, c.Priority, w.name, w.typ, w.priority)
		}
		if c.Description == "" {
			t.Errorf("column %s has no description", c.Name)
		}
	}
	if table.ColumnDefinitions[0].Format != "name" {
		t.Errorf("Name column format = %q, want name", table.ColumnDefinitions[0].Format)
	}
}

// TestColumns pins each kind's column names and which ones are -o wide only
// (marked "+"), in upstream's order. The Name column, wherever it sits, must
// carry the "name" format kubectl relies on.
func TestColumns(t *testing.T) {
	tests := []struct {
		list runtime.Object
		want []string
	}{
		{&corev1.PodList{}, []string{"Name", "Ready", "Status", "Restarts", "Age", "+IP", "+Node", "+Nominated Node", "+Readiness Gates"}},
		{&appsv1.DeploymentList{}, []string{"Name", "Ready", "Up-to-date", "Available", "Age", "+Containers", "+Images", "+Selector"}},
		{&appsv1.ReplicaSetList{}, []string{"Name", "Desired", "Current", "Ready", "Age", "+Containers", "+Images", "+Selector"}},
		{&appsv1.StatefulSetList{}, []string{"Name", "Ready", "Age", "+Containers", "+Images"}},
		{&appsv1.DaemonSetList{}, []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "+Containers", "+Images", "+Selector"}},
		{&appsv1.ControllerRevisionList{}, []string{"Name", "Controller", "Revision", "Age"}},
		{&batchv1.JobList{}, []string{"Name", "Status", "Completions", "Duration", "Age", "+Containers", "+Images", "+Selector"}},
		{&batchv1.CronJobList{}, []string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "+Containers", "+Images", "+Selector"}},
		{&corev1.ReplicationControllerList{}, []string{"Name", "Desired", "Current", "Ready", "Age", "+Containers", "+Images", "+Selector"}},
		{&corev1.ServiceList{}, []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "+Selector"}},
		{&corev1.EndpointsList{}, []string{"Name", "Endpoints", "Age"}},
		{&discoveryv1.EndpointSliceList{}, []string{"Name", "AddressType", "Ports", "Endpoints", "Age"}},
		{&networkingv1.IngressList{}, []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}},
		{&networkingv1.IngressClassList{}, []string{"Name", "Controller", "Parameters", "Age"}},
		{&networkingv1.NetworkPolicyList{}, []string{"Name", "Pod-Selector", "Age"}},
		{&networkingv1.ServiceCIDRList{}, []string{"Name", "CIDRs", "Age"}},
		{&networkingv1.IPAddressList{}, []string{"Name", "ParentRef"}},
		{&corev1.NodeList{}, []string{"Name", "Status", "Roles", "Age", "Version", "+Internal-IP", "+External-IP", "+OS-Image", "+Kernel-Version", "+Container-Runtime"}},
		{&corev1.NamespaceList{}, []string{"Name", "Status", "Age"}},
		{&corev1.SecretList{}, []string{"Name", "Type", "Data", "Age"}},
		{&corev1.ConfigMapList{}, []string{"Name", "Data", "Age"}},
		{&corev1.ServiceAccountList{}, []string{"Name", "Secrets", "Age"}},
		{&corev1.ResourceQuotaList{}, []string{"Name", "Request", "Limit", "Age"}},
		{&corev1.EventList{}, []string{"Last Seen", "Type", "Reason", "Object", "+Subobject", "+Source", "Message", "+First Seen", "+Count", "+Name"}},
		{&eventsv1.EventList{}, []string{"Last Seen", "Type", "Reason", "Object", "+Subobject", "+Source", "Message", "+First Seen", "+Count", "+Name"}},
		{&coordinationv1.LeaseList{}, []string{"Name", "Holder", "Age"}},
		{&corev1.PersistentVolumeList{}, []string{"Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age", "+VolumeMode"}},
		{&corev1.PersistentVolumeClaimList{}, []string{"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "+VolumeMode"}},
		{&storagev1.StorageClassList{}, []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}},
		{&policyv1.PodDisruptionBudgetList{}, []string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"}},
		{&rbacv1.RoleBindingList{}, []string{"Name", "Role", "Age", "+Users", "+Groups", "+ServiceAccounts"}},
		{&rbacv1.ClusterRoleBindingList{}, []string{"Name", "Role", "Age", "+Users", "+Groups", "+ServiceAccounts"}},
		{&rbacv1.RoleList{}, []string{"Name", "Created At"}},
		{&rbacv1.ClusterRoleList{}, []string{"Name", "Created At"}},
		{&corev1.LimitRangeList{}, []string{"Name", "Created At"}},
		{&autoscalingv2.HorizontalPodAutoscalerList{}, []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"}},
		{&schedulingv1.PriorityClassList{}, []string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"}},
		{&nodev1.RuntimeClassList{}, []string{"Name", "Handler", "Age"}},
		{&corev1.PodTemplateList{}, []string{"Name", "Containers", "Images", "Pod Labels"}},
		{&corev1.ComponentStatusList{}, []string{"Name", "Status", "Message", "Error"}},
		{&admissionregistrationv1.MutatingWebhookConfigurationList{}, []string{"Name", "Webhooks", "Age"}},
		{&admissionregistrationv1.ValidatingWebhookConfigurationList{}, []string{"Name", "Webhooks", "Age"}},
	}
	for _, tc := range tests {
		t.Run(reflect.TypeOf(tc.list).Elem().Name(), func(t *testing.T) {
			table := mustTable(t, tc.list)
			var got []string
			for _, c := range table.ColumnDefinitions {
				name := c.Name
				if c.Priority > 0 {
					name = "+" + name
				}
				got = append(got, name)
				if c.Name == "Name" && c.Format != "name" {
					t.Errorf("Name column format = %q, want name", c.Format)
				}
				if c.Description == "" {
					t.Errorf("column %s has no description", c.Name)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("columns\n got: %q\nwant: %q", got, tc.want)
			}
			if len(table.Rows) != 0 {
				t.Errorf("empty list produced %d rows", len(table.Rows))
			}
		})
	}
}

// TestEveryPrinterHandlesZeroValue feeds every registered printer an empty
// object: none may panic or emit a row whose width differs from its columns.
func TestEveryPrinterHandlesZeroValue(t *testing.T) {
	if len(registry) < 30 {
		t.Fatalf("only %d printers registered", len(registry))
	}
	for typ := range registry {
		obj := reflect.New(typ.Elem()).Interface().(runtime.Object)
		table := mustTable(t, obj)
		if len(table.Rows) != 1 {
			t.Errorf("%v: %d rows, want 1", typ, len(table.Rows))
		}
	}
}

func podSpec(containers ...string) corev1.PodTemplateSpec {
	var t corev1.PodTemplateSpec
	for _, n := range containers {
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: n, Image: "example.com/" + n + ":1"})
	}
	return t
}

func appSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func TestWorkloadCells(t *testing.T) {
	tests := []struct {
		name string
		obj  runtime.Object
		want []interface{}
	}{
		{"deployment", &appsv1.Deployment{
			ObjectMeta: objMeta("web"),
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(3)), Selector: appSelector(), Template: podSpec("app", "sidecar")},
			Status:     appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
		}, []interface{}{"web", "2/3", int64(3), int64(2), "5m", "app,sidecar", "example.com/app:1,example.com/sidecar:1", "app=web"}},
		// Deployments print an empty selector as "", the others as <none>.
		{"deployment without selector", &appsv1.Deployment{ObjectMeta: objMeta("bare")},
			[]interface{}{"bare", "0/0", int64(0), int64(0), "5m", "", "", ""}},
		{"replicaset", &appsv1.ReplicaSet{
			ObjectMeta: objMeta("web-abc"),
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(2)), Selector: appSelector(), Template: podSpec("app")},
			Status:     appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1},
		}, []interface{}{"web-abc", int64(2), int64(2), int64(1), "5m", "app", "example.com/app:1", "app=web"}},
		{"replicaset without selector", &appsv1.ReplicaSet{ObjectMeta: objMeta("rs")},
			[]interface{}{"rs", int64(0), int64(0), int64(0), "5m", "", "", "<none>"}},
		{"statefulset", &appsv1.StatefulSet{
			ObjectMeta: objMeta("db"),
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), Template: podSpec("pg")},
			Status:     appsv1.StatefulSetStatus{ReadyReplicas: 1},
		}, []interface{}{"db", "1/3", "5m", "pg", "example.com/pg:1"}},
		{"daemonset", &appsv1.DaemonSet{
			ObjectMeta: objMeta("agent"),
			Spec: appsv1.DaemonSetSpec{Selector: appSelector(), Template: func() corev1.PodTemplateSpec {
				s := podSpec("agent")
				s.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
				return s
			}()},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2},
		}, []interface{}{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "kubernetes.io/os=linux", "5m", "agent", "example.com/agent:1", "app=web"}},
		{"daemonset without node selector", &appsv1.DaemonSet{ObjectMeta: objMeta("ds")},
			[]interface{}{"ds", int64(0), int64(0), int64(0), int64(0), int64(0), "<none>", "5m", "", "", "<none>"}},
		{"replicationcontroller", &corev1.ReplicationController{
			ObjectMeta: objMeta("rc"),
			Spec:       corev1.ReplicationControllerSpec{Replicas: ptr.To(int32(2)), Selector: map[string]string{"app": "web"}, Template: ptr.To(podSpec("app"))},
			Status:     corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 2},
		}, []interface{}{"rc", int64(2), int64(2), int64(2), "5m", "app", "example.com/app:1", "app=web"}},
		{"replicationcontroller without template", &corev1.ReplicationController{ObjectMeta: objMeta("rc")},
			[]interface{}{"rc", int64(0), int64(0), int64(0), "5m", "", "", "<none>"}},
		{"controllerrevision owned by statefulset", &appsv1.ControllerRevision{
			ObjectMeta: func() metav1.ObjectMeta {
				m := objMeta("db-7d9f")
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}
				return m
			}(),
			Revision: 4,
		}, []interface{}{"db-7d9f", "statefulset.apps/db", int64(4), "5m"}},
		{"controllerrevision without controller", &appsv1.ControllerRevision{ObjectMeta: objMeta("orphan"), Revision: 1},
			[]interface{}{"orphan", "<none>", int64(1), "5m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertCells(t, cellsOf(t, tc.obj), tc.want)
		})
	}
}

func TestControllerRevisionBadOwnerAPIVersion(t *testing.T) {
	cr := &appsv1.ControllerRevision{ObjectMeta: objMeta("bad")}
	cr.OwnerReferences = []metav1.OwnerReference{{APIVersion: "a/b/c", Kind: "X", Name: "x", Controller: ptr.To(true)}}
	if _, err := TableFor(cr, now); err == nil {
		t.Fatal("expected an error for an unparsable owner apiVersion, as upstream")
	}
}

func TestJobCells(t *testing.T) {
	job := func(mut func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: objMeta("pi"),
			Spec:       batchv1.JobSpec{Completions: ptr.To(int32(1)), Selector: appSelector(), Template: podSpec("pi")},
		}
		mut(j)
		return j
	}
	cond := func(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: s}
	}
	tests := []struct {
		name                           string
		job                            *batchv1.Job
		status, completions, durationS string
	}{
		{"not started", job(func(*batchv1.Job) {}), "Running", "0/1", ""},
		{"running for 90s", job(func(j *batchv1.Job) { j.Status.StartTime = agoPtr(90 * time.Second) }), "Running", "0/1", "90s"},
		{"complete after 2m", job(func(j *batchv1.Job) {
			j.Status.StartTime = agoPtr(4 * time.Minute)
			j.Status.CompletionTime = agoPtr(2 * time.Minute)
			j.Status.Succeeded = 1
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue)}
		}), "Complete", "1/1", "2m"},
		{"failed", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue)}
		}), "Failed", "0/1", ""},
		{"complete wins over terminating", job(func(j *batchv1.Job) {
			j.DeletionTimestamp = agoPtr(time.Second)
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue)}
		}), "Complete", "0/1", ""},
		{"terminating wins over suspended", job(func(j *batchv1.Job) {
			j.DeletionTimestamp = agoPtr(time.Second)
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}
		}), "Terminating", "0/1", ""},
		{"suspended", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}
		}), "Suspended", "0/1", ""},
		{"failure target", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}
		}), "FailureTarget", "0/1", ""},
		{"false condition ignored", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionFalse)}
		}), "Running", "0/1", ""},
		{"work queue with parallelism", job(func(j *batchv1.Job) {
			j.Spec.Completions = nil
			j.Spec.Parallelism = ptr.To(int32(4))
			j.Status.Succeeded = 2
		}), "Running", "2/1 of 4", ""},
		{"work queue without parallelism", job(func(j *batchv1.Job) { j.Spec.Completions = nil }), "Running", "0/1", ""},
		{"indexed completions", job(func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To(int32(5))
			j.Status.Succeeded = 3
		}), "Running", "3/5", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertCells(t, cellsOf(t, tc.job), []interface{}{
				"pi", tc.status, tc.completions, tc.durationS, "5m", "pi", "example.com/pi:1", "app=web",
			})
		})
	}
}

func TestCronJobCells(t *testing.T) {
	cj := &batchv1.CronJob{
		ObjectMeta: objMeta("nightly"),
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			TimeZone: ptr.To("Europe/Paris"),
			Suspend:  ptr.To(false),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Selector: appSelector(),
				Template: podSpec("backup"),
			}},
		},
		Status: batchv1.CronJobStatus{
			Active:           []corev1.ObjectReference{{Name: "nightly-1"}},
			LastScheduleTime: agoPtr(3 * time.Hour),
		},
	}
	assertCells(t, cellsOf(t, cj), []interface{}{
		"nightly", "0 3 * * *", "Europe/Paris", "False", int64(1), "3h", "5m", "backup", "example.com/backup:1", "app=web",
	})

	bare := &batchv1.CronJob{ObjectMeta: objMeta("bare"), Spec: batchv1.CronJobSpec{Schedule: "@hourly"}}
	assertCells(t, cellsOf(t, bare), []interface{}{
		"bare", "@hourly", "<none>", "<unset>", int64(0), "<none>", "5m", "", "", "<none>",
	})

	bare.Spec.Suspend = ptr.To(true)
	assertColumn(t, cellByColumn(t, bare), "Suspend", "True")
}

func TestServiceCells(t *testing.T) {
	svc := func(typ corev1.ServiceType, mut func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: objMeta("web"),
			Spec: corev1.ServiceSpec{
				Type:       typ,
				ClusterIP:  "10.96.0.10",
				ClusterIPs: []string{"10.96.0.10", "fd00::a"},
				Ports:      []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
				Selector:   map[string]string{"app": "web"},
			},
		}
		if mut != nil {
			mut(s)
		}
		return s
	}
	tests := []struct {
		name                            string
		svc                             *corev1.Service
		typ, clusterIP, external, ports string
	}{
		{"cluster ip", svc(corev1.ServiceTypeClusterIP, nil), "ClusterIP", "10.96.0.10", "<none>", "80/TCP"},
		{"cluster ip with external ips", svc(corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"1.2.3.4", "5.6.7.8"}
		}), "ClusterIP", "10.96.0.10", "1.2.3.4,5.6.7.8", "80/TCP"},
		{"node port", svc(corev1.ServiceTypeNodePort, func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}
		}), "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP"},
		{"load balancer pending", svc(corev1.ServiceTypeLoadBalancer, nil), "LoadBalancer", "10.96.0.10", "<pending>", "80/TCP"},
		{"load balancer provisioned", svc(corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}, {Hostname: "lb.example.com"}, {IP: "203.0.113.1"}, {IP: "203.0.113.9"}}
		}), "LoadBalancer", "10.96.0.10", "203.0.113.1,203.0.113.9,lb.example.com", "80/TCP"},
		{"load balancer plus external ips", svc(corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}}
			s.Spec.ExternalIPs = []string{"1.2.3.4"}
		}), "LoadBalancer", "10.96.0.10", "203.0.113.9,1.2.3.4", "80/TCP"},
		{"external name", svc(corev1.ServiceTypeExternalName, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports = "", nil, nil
			s.Spec.ExternalName = "db.example.com"
		}), "ExternalName", "<none>", "db.example.com", "<none>"},
		{"headless", svc(corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		}), "ClusterIP", "None", "<none>", "80/TCP"},
		{"undefaulted type", svc("", func(s *corev1.Service) { s.Spec.ClusterIPs = nil }), "", "10.96.0.10", "<unknown>", "80/TCP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertCells(t, cellsOf(t, tc.svc), []interface{}{"web", tc.typ, tc.clusterIP, tc.external, tc.ports, "5m", "app=web"})
		})
	}

	noSelector := svc(corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.Selector = nil })
	assertColumn(t, cellByColumn(t, noSelector), "Selector", "<none>")
}

func TestEndpointsCells(t *testing.T) {
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{"no subsets", nil, "<none>"},
		{"one port", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{{Port: 8080}}}}, "10.0.0.1:8080,10.0.0.2:8080"},
		{"ipv6", []corev1.EndpointSubset{{Addresses: addrs("fd00::1"), Ports: []corev1.EndpointPort{{Port: 80}}}}, "[fd00::1]:80"},
		{"headless without ports", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1")}}, "10.0.0.1"},
		{"more than three", []corev1.EndpointSubset{
			{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: []corev1.EndpointPort{{Port: 80}, {Port: 443}}},
			{Addresses: addrs("10.0.0.3")},
		}, "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."},
		{"only not-ready addresses", []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{{Port: 80}}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: objMeta("web"), Subsets: tc.subsets}
			assertCells(t, cellsOf(t, ep), []interface{}{"web", tc.want, "5m"})
		})
	}
}

func TestEndpointSliceCells(t *testing.T) {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  objMeta("web-x7k"),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}, {Name: ptr.To("metrics")}, {}, {Port: ptr.To(int32(443))}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}},
			{Addresses: []string{"10.0.0.2", "10.0.0.3"}},
		},
	}
	assertCells(t, cellsOf(t, es), []interface{}{"web-x7k", "IPv4", "80,metrics,* + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3", "5m"})

	empty := &discoveryv1.EndpointSlice{ObjectMeta: objMeta("empty"), AddressType: discoveryv1.AddressTypeIPv6}
	assertCells(t, cellsOf(t, empty), []interface{}{"empty", "IPv6", "<unset>", "<unset>", "5m"})
}

func TestIngressCells(t *testing.T) {
	ing := &networkingv1.Ingress{
		ObjectMeta: objMeta("web"),
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("nginx"),
			Rules:            []networkingv1.IngressRule{{Host: "a.example.com"}, {}, {Host: "b.example.com"}, {Host: "c.example.com"}, {Host: "d.example.com"}},
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"a.example.com"}}},
		},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
			Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.5"}, {Hostname: "lb.example.com"}},
		}},
	}
	// The host-less rule is not shown yet still counts toward "+ N more"
	// (only d.example.com is actually hidden), as upstream counts rules.
	assertCells(t, cellsOf(t, ing), []interface{}{"web", "nginx", "a.example.com,b.example.com,c.example.com + 2 more...", "203.0.113.5,lb.example.com", "80, 443", "5m"})

	bare := &networkingv1.Ingress{ObjectMeta: objMeta("bare")}
	assertCells(t, cellsOf(t, bare), []interface{}{"bare", "<none>", "*", "", "80", "5m"})

	ic := &networkingv1.IngressClass{
		ObjectMeta: objMeta("nginx"),
		Spec: networkingv1.IngressClassSpec{
			Controller: "k8s.io/ingress-nginx",
			Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
		},
	}
	assertCells(t, cellsOf(t, ic), []interface{}{"nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb", "5m"})
	assertColumn(t, cellByColumn(t, &networkingv1.IngressClass{ObjectMeta: objMeta("x")}), "Parameters", "<none>")

	np := &networkingv1.NetworkPolicy{ObjectMeta: objMeta("deny"), Spec: networkingv1.NetworkPolicySpec{PodSelector: *appSelector()}}
	assertCells(t, cellsOf(t, np), []interface{}{"deny", "app=web", "5m"})
	assertColumn(t, cellByColumn(t, &networkingv1.NetworkPolicy{ObjectMeta: objMeta("all")}), "Pod-Selector", "<none>")

	sc := &networkingv1.ServiceCIDR{ObjectMeta: objMeta("kubernetes"), Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.0.0/16", "fd00:43::/112"}}}
	assertCells(t, cellsOf(t, sc), []interface{}{"kubernetes", "10.43.0.0/16,fd00:43::/112", "5m"})
	svcIP := &networkingv1.IPAddress{ObjectMeta: objMeta("10.43.0.1"),
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "kubernetes"}}}
	assertCells(t, cellsOf(t, svcIP), []interface{}{"10.43.0.1", "services/default/kubernetes"})
	gwIP := &networkingv1.IPAddress{ObjectMeta: objMeta("203.0.113.9"),
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "Gateway.Networking.k8s.io", Resource: "gateways", Name: "gw"}}}
	assertCells(t, cellsOf(t, gwIP), []interface{}{"203.0.113.9", "gateways.gateway.networking.k8s.io/gw"})
	assertColumn(t, cellByColumn(t, &networkingv1.IPAddress{ObjectMeta: objMeta("10.43.0.2")}), "ParentRef", "<none>")
}

func TestNodeCells(t *testing.T) {
	node := func(mut func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: ago(72 * time.Hour)},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{
					{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
				},
				Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeHostName, Address: "n1"},
					{Type: corev1.NodeInternalIP, Address: "192.168.1.10"},
					{Type: corev1.NodeInternalIP, Address: "192.168.1.11"},
					{Type: corev1.NodeExternalIP, Address: "203.0.113.10"},
				},
				NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13", KernelVersion: "6.12.0", ContainerRuntimeVersion: "containerd://2.1.0"},
			},
		}
		if mut != nil {
			mut(n)
		}
		return n
	}
	assertCells(t, cellsOf(t, node(nil)), []interface{}{
		"n1", "Ready", "<none>", "3d", "v1.37.2", "192.168.1.10", "203.0.113.10", "Debian GNU/Linux 13", "6.12.0", "containerd://2.1.0",
	})

	tests := []struct {
		name        string
		node        *corev1.Node
		status      string
		roles       string
		internal    string
		external    string
		runtimeInfo string
	}{
		{"not ready and cordoned", node(func(n *corev1.Node) {
			n.Status.Conditions[1].Status = corev1.ConditionFalse
			n.Spec.Unschedulable = true
		}), "NotReady,SchedulingDisabled", "<none>", "192.168.1.10", "203.0.113.10", "containerd://2.1.0"},
		{"ready unknown reads as not ready", node(func(n *corev1.Node) {
			n.Status.Conditions[1].Status = corev1.ConditionUnknown
		}), "NotReady", "<none>", "192.168.1.10", "203.0.113.10", "containerd://2.1.0"},
		{"no ready condition", node(func(n *corev1.Node) {
			n.Status.Conditions = n.Status.Conditions[:1]
			n.Spec.Unschedulable = true
		}), "Unknown,SchedulingDisabled", "<none>", "192.168.1.10", "203.0.113.10", "containerd://2.1.0"},
		{"roles from both label forms, sorted and unique", node(func(n *corev1.Node) {
			n.Labels = map[string]string{
				"node-role.kubernetes.io/control-plane": "",
				"node-role.kubernetes.io/worker":        "true",
				"node-role.kubernetes.io/":              "",
				"kubernetes.io/role":                    "worker",
				"kubernetes.io/hostname":                "n1",
			}
		}), "Ready", "control-plane,worker", "192.168.1.10", "203.0.113.10", "containerd://2.1.0"},
		{"legacy role label", node(func(n *corev1.Node) {
			n.Labels = map[string]string{"kubernetes.io/role": "master"}
		}), "Ready", "master", "192.168.1.10", "203.0.113.10", "containerd://2.1.0"},
		{"no addresses or runtime info", node(func(n *corev1.Node) {
			n.Status.Addresses = nil
			n.Status.NodeInfo.ContainerRuntimeVersion = ""
		}), "Ready", "<none>", "<none>", "<none>", "<unknown>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cellByColumn(t, tc.node)
			assertColumn(t, c, "Status", tc.status)
			assertColumn(t, c, "Roles", tc.roles)
			assertColumn(t, c, "Internal-IP", tc.internal)
			assertColumn(t, c, "External-IP", tc.external)
			assertColumn(t, c, "Container-Runtime", tc.runtimeInfo)
		})
	}
}

func TestEventCells(t *testing.T) {
	core := &corev1.Event{
		ObjectMeta:     objMeta("web.17f3a"),
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
		Reason:         "BackOff",
		Message:        "Back-off restarting failed container\n",
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "n1"},
		FirstTimestamp: ago(10 * time.Minute),
		LastTimestamp:  ago(30 * time.Second),
		Count:          7,
	}
	assertCells(t, cellsOf(t, core), []interface{}{
		"30s", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, n1",
		"Back-off restarting failed container", "10m", int64(7), "web.17f3a",
	})

	// An event written through events.k8s.io: no deprecated timestamps, a
	// series, and the reporting controller standing in for the source.
	series := &eventsv1.Event{
		ObjectMeta:          objMeta("web.17f3b"),
		EventTime:           metav1.NewMicroTime(now.Add(-20 * time.Minute)),
		Series:              &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(-time.Minute))},
		ReportingController: "default-scheduler",
		ReportingInstance:   "scheduler-1",
		Reason:              "FailedScheduling",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Name: "web"},
		Note:                "0/3 nodes are available",
		Type:                corev1.EventTypeWarning,
	}
	assertCells(t, cellsOf(t, series), []interface{}{
		"60s", "Warning", "FailedScheduling", "pod/web", "", "default-scheduler, scheduler-1",
		"0/3 nodes are available", "20m", int64(3), "web.17f3b",
	})

	// A singleton new-style event has no count: it happened once.
	single := &eventsv1.Event{
		ObjectMeta:          objMeta("ns.1"),
		EventTime:           metav1.NewMicroTime(now.Add(-2 * time.Minute)),
		ReportingController: "ctrl",
		Regarding:           corev1.ObjectReference{Kind: "Namespace"},
		Type:                corev1.EventTypeNormal,
	}
	assertCells(t, cellsOf(t, single), []interface{}{
		"2m", "Normal", "", "namespace", "", "ctrl", "", "2m", int64(1), "ns.1",
	})

	// A core event with no timestamps at all.
	empty := &corev1.Event{ObjectMeta: objMeta("e")}
	c := cellByColumn(t, empty)
	assertColumn(t, c, "Last Seen", "<unknown>")
	assertColumn(t, c, "First Seen", "<unknown>")
	assertColumn(t, c, "Count", int64(1))
}

func TestConfigCells(t *testing.T) {
	tests := []struct {
		name string
		obj  runtime.Object
		want []interface{}
	}{
		{"namespace", &corev1.Namespace{ObjectMeta: objMeta("prod"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			[]interface{}{"prod", "Active", "5m"}},
		{"terminating namespace", &corev1.Namespace{ObjectMeta: objMeta("old"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			[]interface{}{"old", "Terminating", "5m"}},
		{"secret", &corev1.Secret{ObjectMeta: objMeta("tls"), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}},
			[]interface{}{"tls", "kubernetes.io/tls", int64(2), "5m"}},
		{"configmap counts binary data too", &corev1.ConfigMap{ObjectMeta: objMeta("cfg"), Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": nil}},
			[]interface{}{"cfg", int64(2), "5m"}},
		{"serviceaccount", &corev1.ServiceAccount{ObjectMeta: objMeta("default"), Secrets: []corev1.ObjectReference{{Name: "tok"}}},
			[]interface{}{"default", int64(1), "5m"}},
		{"lease", &coordinationv1.Lease{ObjectMeta: objMeta("kube-scheduler"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1_abc")}},
			[]interface{}{"kube-scheduler", "n1_abc", "5m"}},
		{"lease without holder", &coordinationv1.Lease{ObjectMeta: objMeta("free")},
			[]interface{}{"free", "", "5m"}},
		{"resourcequota", &corev1.ResourceQuota{
			ObjectMeta: objMeta("quota"),
			Status: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{
					"pods":            resource.MustParse("10"),
					"requests.cpu":    resource.MustParse("4"),
					"limits.memory":   resource.MustParse("8Gi"),
					"limits.cpu":      resource.MustParse("8"),
					"requests.memory": resource.MustParse("4Gi"),
				},
				Used: corev1.ResourceList{
					"pods":          resource.MustParse("3"),
					"requests.cpu":  resource.MustParse("500m"),
					"limits.memory": resource.MustParse("1Gi"),
				},
			},
		}, []interface{}{"quota", "pods: 3/10, requests.cpu: 500m/4, requests.memory: 0/4Gi", "limits.cpu: 0/8, limits.memory: 1Gi/8Gi", "5m"}},
		{"pdb min available", &policyv1.PodDisruptionBudget{
			ObjectMeta: objMeta("web"),
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
		}, []interface{}{"web", "2", "N/A", int64(1), "5m"}},
		{"pdb max unavailable", &policyv1.PodDisruptionBudget{
			ObjectMeta: objMeta("web"),
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("25%"))},
		}, []interface{}{"web", "N/A", "25%", int64(0), "5m"}},
		{"priorityclass", &schedulingv1.PriorityClass{ObjectMeta: objMeta("high"), Value: 1000, GlobalDefault: true, PreemptionPolicy: ptr.To(corev1.PreemptNever)},
			[]interface{}{"high", int64(1000), true, "5m", "Never"}},
		{"runtimeclass", &nodev1.RuntimeClass{ObjectMeta: objMeta("gvisor"), Handler: "runsc"},
			[]interface{}{"gvisor", "runsc", "5m"}},
		{"podtemplate", &corev1.PodTemplate{ObjectMeta: objMeta("tmpl"), Template: func() corev1.PodTemplateSpec {
			s := podSpec("app")
			s.Labels = map[string]string{"app": "web"}
			return s
		}()}, []interface{}{"tmpl", "app", "example.com/app:1", "app=web"}},
		{"componentstatus", &corev1.ComponentStatus{ObjectMeta: objMeta("etcd-0"), Conditions: []corev1.ComponentCondition{
			{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Message: "", Error: "dial tcp: refused"},
		}}, []interface{}{"etcd-0", "Unhealthy", "", "dial tcp: refused"}},
		{"mutating webhooks", &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: objMeta("inject"), Webhooks: make([]admissionregistrationv1.MutatingWebhook, 2)},
			[]interface{}{"inject", int64(2), "5m"}},
		{"validating webhooks", &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: objMeta("policy"), Webhooks: make([]admissionregistrationv1.ValidatingWebhook, 1)},
			[]interface{}{"policy", int64(1), "5m"}},
		{"status", &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Message: "gone"},
			[]interface{}{"Failure", "NotFound", "gone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertCells(t, cellsOf(t, tc.obj), tc.want)
		})
	}
}

func TestStorageCells(t *testing.T) {
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: objMeta("pv-1"),
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: "data"},
			StorageClassName:              "fast",
			VolumeMode:                    &fs,
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	assertCells(t, cellsOf(t, pv), []interface{}{"pv-1", "10Gi", "RWO,RWX", "Retain", "Bound", "default/data", "fast", "<unset>", "", "5m", "Filesystem"})

	pv.DeletionTimestamp = agoPtr(time.Second)
	pv.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "legacy"}
	pv.Spec.VolumeAttributesClassName = ptr.To("gold")
	c := cellByColumn(t, pv)
	assertColumn(t, c, "Status", "Terminating")
	assertColumn(t, c, "StorageClass", "legacy")
	assertColumn(t, c, "VolumeAttributesClass", "gold")

	pending := &corev1.PersistentVolumeClaim{
		ObjectMeta: objMeta("data"),
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("fast"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	// Unbound claims show neither the request nor the access modes.
	assertCells(t, cellsOf(t, pending), []interface{}{"data", "Pending", "", "", "", "fast", "<unset>", "5m", "<unset>"})

	bound := pending.DeepCopy()
	bound.Spec.VolumeName = "pv-1"
	bound.Spec.VolumeMode = &fs
	bound.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimBound,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
	}
	assertCells(t, cellsOf(t, bound), []interface{}{"data", "Bound", "pv-1", "10Gi", "RWOP", "fast", "<unset>", "5m", "Filesystem"})

	sc := &storagev1.StorageClass{
		ObjectMeta:  objMeta("standard"),
		Provisioner: "rancher.io/local-path",
	}
	sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	assertCells(t, cellsOf(t, sc), []interface{}{"standard (default)", "rancher.io/local-path", "Delete", "Immediate", false, "5m"})

	wait := storagev1.VolumeBindingWaitForFirstConsumer
	retain := corev1.PersistentVolumeReclaimRetain
	sc2 := &storagev1.StorageClass{ObjectMeta: objMeta("slow"), Provisioner: "csi.example.com", ReclaimPolicy: &retain, VolumeBindingMode: &wait, AllowVolumeExpansion: ptr.To(true)}
	assertCells(t, cellsOf(t, sc2), []interface{}{"slow", "csi.example.com", "Retain", "WaitForFirstConsumer", true, "5m"})
}

func TestRBACCells(t *testing.T) {
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: "alice"},
		{Kind: rbacv1.UserKind, Name: "bob"},
		{Kind: rbacv1.GroupKind, Name: "devs"},
		{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "ctrl"},
		{Kind: "Robot", Name: "r2"},
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: objMeta("edit"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: subjects}
	assertCells(t, cellsOf(t, rb), []interface{}{"edit", "ClusterRole/edit", "5m", "alice, bob", "devs", "kube-system/ctrl"})

	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: objMeta("admin"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}}
	assertCells(t, cellsOf(t, crb), []interface{}{"admin", "ClusterRole/cluster-admin", "5m", "", "", ""})
}

func TestHPACells(t *testing.T) {
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(80))},
	}}
	mem := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("512Mi"))},
	}}
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100"))},
	}}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: objMeta("web"),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"},
			MinReplicas:    ptr.To(int32(2)),
			MaxReplicas:    10,
			Metrics:        []autoscalingv2.MetricSpec{cpu, mem},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			CurrentReplicas: 3,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(int32(45))},
			}}},
		},
	}
	assertCells(t, cellsOf(t, hpa), []interface{}{"web", "Deployment/web", "cpu: 45%/80%, memory: <unknown>/512Mi", "2", int64(10), int64(3), "5m"})
	// Read through autoscaling/v1, an HPA prints as its v2 form: the CPU
	// target from targetCPUUtilizationPercentage, the others from the
	// metrics annotation (first, as upstream's conversion orders them).
	v1 := conversion.HorizontalPodAutoscalerV2ToV1(hpa)
	assertCells(t, cellsOf(t, v1), []interface{}{"web", "Deployment/web", "memory: 0/512Mi, cpu: <unknown>/80%", "2", int64(10), int64(3), "5m"})
	v1.Annotations = nil
	assertCells(t, cellsOf(t, v1), []interface{}{"web", "Deployment/web", "cpu: 45%/80%", "2", int64(10), int64(3), "5m"})
	hpa.Spec.Metrics = append(hpa.Spec.Metrics, pods)
	hpa.Spec.MinReplicas = nil
	c := cellByColumn(t, hpa)
	assertColumn(t, c, "Targets", "cpu: 45%/80%, memory: <unknown>/512Mi + 1 more...")
	assertColumn(t, c, "MinPods", "<unset>")

	hpa.Spec.Metrics = nil
	assertColumn(t, cellByColumn(t, hpa), "Targets", "<none>")
}

func TestAgeFormatting(t *testing.T) {
	tests := []struct {
		created metav1.Time
		want    string
	}{
		{metav1.Time{}, "<unknown>"},
		{ago(0), "0s"},
		{ago(45 * time.Second), "45s"},
		{ago(3*time.Minute + 20*time.Second), "3m20s"},
		{ago(5 * time.Hour), "5h"},
		{ago(26 * time.Hour), "26h"},
		{ago(50 * 24 * time.Hour), "50d"},
		{metav1.NewTime(now.Add(time.Hour)), "<invalid>"},
	}
	for _, tc := range tests {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", CreationTimestamp: tc.created}}
		assertColumn(t, cellByColumn(t, ns), "Age", tc.want)
	}
}

func TestListMetadataAndRows(t *testing.T) {
	list := &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "token", RemainingItemCount: ptr.To(int64(7))},
		Items: []corev1.Pod{
			*withStatuses(newPod(corev1.PodRunning, []string{"app"}), status("app", running(), true)),
			*newPod(corev1.PodPending, []string{"app"}),
		},
	}
	list.Items[1].Name = "second"
	table := mustTable(t, list)
	if table.ResourceVersion != "42" || table.Continue != "token" || table.RemainingItemCount == nil || *table.RemainingItemCount != 7 {
		t.Errorf("list meta = %q/%q/%v", table.ResourceVersion, table.Continue, table.RemainingItemCount)
	}
	if len(table.Rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(table.Rows))
	}
	assertCells(t, table.Rows[0].Cells[:3], []interface{}{"web", "1/1", "Running"})
	assertCells(t, table.Rows[1].Cells[:3], []interface{}{"second", "0/1", "Pending"})
	// Rows point at the list's own items so the server can reduce them to
	// PartialObjectMetadata without copying.
	if table.Rows[1].Object.Object != &list.Items[1] {
		t.Errorf("row object %p is not &Items[1] %p", table.Rows[1].Object.Object, &list.Items[1])
	}

	single := newPod(corev1.PodPending, []string{"app"})
	single.ResourceVersion = "9"
	table = mustTable(t, single)
	if table.ResourceVersion != "9" || table.Continue != "" {
		t.Errorf("single object meta = %q/%q, want 9/\"\"", table.ResourceVersion, table.Continue)
	}
	if table.Rows[0].Object.Object != single {
		t.Error("single row does not carry the object")
	}
}

func TestDefaultTable(t *testing.T) {
	created := metav1.NewTime(time.Date(2024, 2, 3, 4, 5, 6, 0, time.FixedZone("CET", 3600)))
	roles := &rbacv1.RoleList{
		ListMeta: metav1.ListMeta{ResourceVersion: "11", Continue: "c"},
		Items: []rbacv1.Role{
			{ObjectMeta: metav1.ObjectMeta{Name: "reader", CreationTimestamp: created}},
			{ObjectMeta: metav1.ObjectMeta{Name: "writer"}},
		},
	}
	table := mustTable(t, roles)
	want := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
	if !reflect.DeepEqual(table.ColumnDefinitions, want) {
		t.Errorf("columns = %#v", table.ColumnDefinitions)
	}
	if len(table.Rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(table.Rows))
	}
	// Created At is an absolute UTC timestamp, not an age.
	assertCells(t, table.Rows[0].Cells, []interface{}{"reader", "2024-02-03T03:05:06Z"})
	assertCells(t, table.Rows[1].Cells, []interface{}{"writer", "0001-01-01T00:00:00Z"})
	if table.ResourceVersion != "11" || table.Continue != "c" {
		t.Errorf("list meta = %q/%q", table.ResourceVersion, table.Continue)
	}

	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", CreationTimestamp: created, ResourceVersion: "3"}}
	table = mustTable(t, lr)
	assertCells(t, table.Rows[0].Cells, []interface{}{"limits", "2024-02-03T03:05:06Z"})
	if table.ResourceVersion != "3" {
		t.Errorf("resourceVersion = %q, want 3", table.ResourceVersion)
	}

	u := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]interface{}{"name": "w1"},
	}}}}
	u.SetResourceVersion("5")
	table = mustTable(t, u)
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "w1" || table.ResourceVersion != "5" {
		t.Errorf("unstructured table = %#v", table)
	}
}

// CSIDriver's row as upstream's: unset fields print their API defaults,
// no token requests "<unset>", no modes "<none>".
func TestCSIDriverCells(t *testing.T) {
	bare := &storagev1.CSIDriver{ObjectMeta: objMeta("csi.example.com")}
	assertCells(t, cellsOf(t, bare), []interface{}{"csi.example.com", true, false, false, "<unset>", false, "<none>", "5m"})
	set := &storagev1.CSIDriver{ObjectMeta: objMeta("csi.example.com"), Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
		TokenRequests:        []storagev1.TokenRequest{{Audience: "a"}, {Audience: "b"}},
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
	}}
	assertCells(t, cellsOf(t, set), []interface{}{"csi.example.com", false, true, false, "a,b", false, "Persistent,Ephemeral", "5m"})
}
