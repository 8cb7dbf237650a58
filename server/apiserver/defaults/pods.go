package defaults

import (
	"strings"

	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// pod applies SetObjectDefaults_Pod: the PodSpec defaults shared with every
// pod template, plus the Pod-only ones (SetDefaults_Pod) that upstream
// deliberately keeps out of templates so that adding them never changes a
// workload's template hash.
func Pod(p *corev1.Pod) {
	spec := &p.Spec

	// Requests default to limits, per resource, for Pods only (not templates).
	for i := range spec.Containers {
		requestsFromLimits(&spec.Containers[i].Resources)
	}
	for i := range spec.InitContainers {
		requestsFromLimits(&spec.InitContainers[i].Resources)
	}
	podLevelResources(p)

	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	if spec.HostNetwork {
		hostNetworkPorts(spec.Containers)
		hostNetworkPorts(spec.InitContainers)
	}

	podSpec(spec)
	for i := range spec.EphemeralContainers {
		container((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// podTemplateSpec applies the defaults every embedded pod template gets
// (PodTemplate, ReplicationController, Deployment, ReplicaSet, StatefulSet,
// DaemonSet, Job, CronJob). Pod-only defaults (requests from limits,
// enableServiceLinks, hostNetwork ports) are intentionally absent.
func podTemplateSpec(t *corev1.PodTemplateSpec) {
	podSpec(&t.Spec)
}

// podSpec is SetDefaults_PodSpec plus the nested per-type defaulters the
// generated code calls for volumes and containers.
func podSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		volume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		container(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		container(&spec.Containers[i])
	}
	roundResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundResourceList(spec.Resources.Limits)
		roundResourceList(spec.Resources.Requests)
	}
}

// container is SetDefaults_Container plus the nested defaults for ports,
// env, resources, probes and lifecycle handlers.
func container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil {
			objectFieldSelector(vf.FieldRef)
		}
	}
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	probe(c.LivenessProbe)
	probe(c.ReadinessProbe)
	probe(c.StartupProbe)
	if c.Lifecycle != nil {
		lifecycleHandler(c.Lifecycle.PostStart)
		lifecycleHandler(c.Lifecycle.PreStop)
	}
}

// pullPolicyFor mirrors upstream: Always when the image's tag is "latest"
// (an image with neither tag nor digest is implicitly :latest), otherwise
// IfNotPresent. A digest-only reference is immutable, so IfNotPresent.
func pullPolicyFor(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// imageTag returns the tag of an image reference the way upstream's
// parsers.ParseImageName reports it: "latest" when neither a tag nor a
// digest is present, "" when only a digest is present.
func imageTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	// A ':' after the last '/' separates the tag; an earlier one is a
	// registry port (registry:5000/app).
	tag := ""
	if i := strings.LastIndex(name, ":"); i >= 0 && i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	if tag == "" && !hasDigest {
		return "latest"
	}
	return tag
}

func objectFieldSelector(s *corev1.ObjectFieldSelector) {
	if s.APIVersion == "" {
		s.APIVersion = "v1"
	}
}

// probe is SetDefaults_Probe plus the handler defaults.
func probe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	httpGetAction(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		// +default="" on GRPCAction.Service.
		p.GRPC.Service = ptr.To("")
	}
}

func lifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		httpGetAction(h.HTTPGet)
	}
}

func httpGetAction(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// volume is SetDefaults_Volume plus the per-source defaulters.
func volume(v *corev1.Volume) {
	if volumeSourceEmpty(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	if src.HostPath != nil {
		hostPath(src.HostPath)
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if src.DownwardAPI != nil {
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		for i := range src.DownwardAPI.Items {
			if fr := src.DownwardAPI.Items[i].FieldRef; fr != nil {
				objectFieldSelector(fr)
			}
		}
	}
	if src.Projected != nil {
		if src.Projected.DefaultMode == nil {
			src.Projected.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range src.Projected.Sources {
			s := &src.Projected.Sources[i]
			if s.DownwardAPI != nil {
				for j := range s.DownwardAPI.Items {
					if fr := s.DownwardAPI.Items[j].FieldRef; fr != nil {
						objectFieldSelector(fr)
					}
				}
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				s.ServiceAccountToken.ExpirationSeconds = ptr.To(int64(3600))
			}
		}
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if src.RBD != nil {
		rbd(&src.RBD.RBDPool, &src.RBD.RadosUser, &src.RBD.Keyring)
	}
	if src.AzureDisk != nil {
		azureDisk(src.AzureDisk)
	}
	if src.ScaleIO != nil {
		scaleIO(&src.ScaleIO.StorageMode, &src.ScaleIO.FSType)
	}
	if src.Ephemeral != nil && src.Ephemeral.VolumeClaimTemplate != nil {
		pvcSpec(&src.Ephemeral.VolumeClaimTemplate.Spec)
	}
	if src.Image != nil && src.Image.PullPolicy == "" {
		// Image volumes (ImageVolume feature) follow the container rule.
		src.Image.PullPolicy = pullPolicyFor(src.Image.Reference)
	}
}

// volumeSourceEmpty reports whether no source pointer is set, the condition
// under which upstream turns a bare volume into an emptyDir.
func volumeSourceEmpty(s *corev1.VolumeSource) bool {
	return *s == corev1.VolumeSource{}
}

func hostPath(h *corev1.HostPathVolumeSource) {
	if h.Type == nil {
		h.Type = ptr.To(corev1.HostPathUnset)
	}
}

func rbd(pool, user, keyring *string) {
	if *pool == "" {
		*pool = "rbd"
	}
	if *user == "" {
		*user = "admin"
	}
	if *keyring == "" {
		*keyring = "/etc/ceph/keyring"
	}
}

func azureDisk(a *corev1.AzureDiskVolumeSource) {
	if a.CachingMode == nil {
		a.CachingMode = ptr.To(corev1.AzureDataDiskCachingReadWrite)
	}
	if a.FSType == nil {
		a.FSType = ptr.To("ext4")
	}
	if a.ReadOnly == nil {
		a.ReadOnly = ptr.To(false)
	}
	if a.Kind == nil {
		a.Kind = ptr.To(corev1.AzureSharedBlobDisk)
	}
}

func scaleIO(storageMode, fsType *string) {
	if *storageMode == "" {
		*storageMode = "ThinProvisioned"
	}
	if *fsType == "" {
		*fsType = "xfs"
	}
}

// requestsFromLimits copies each limit into requests when that resource has
// no request: a container that only states limits is guaranteed them.
func requestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = make(corev1.ResourceList, len(r.Limits))
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = q.DeepCopy()
		}
	}
}

// podLevelResources defaults pod-level requests (spec.resources) when
// pod-level limits are set: for cpu and memory, the aggregate of container
// requests if any container requests the resource, else the pod limit.
// This is the PodLevelResources feature (beta, on by default upstream).
func podLevelResources(p *corev1.Pod) {
	res := p.Spec.Resources
	if res == nil || len(res.Limits) == 0 {
		return
	}
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := res.Requests[name]; ok {
			continue
		}
		if agg, ok := aggregateRequests(&p.Spec, name); ok {
			res.Requests[name] = agg
		} else if lim, ok := res.Limits[name]; ok {
			res.Requests[name] = lim.DeepCopy()
		}
	}
	// Hugepages and other supported resources: request = limit.
	for name, lim := range res.Limits {
		if _, ok := res.Requests[name]; !ok && strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			res.Requests[name] = lim.DeepCopy()
		}
	}
	if len(res.Requests) == 0 {
		res.Requests = nil
	}
}

// aggregateRequests computes a pod's effective request for one resource:
// sidecars (restartable init containers) and regular containers run
// together and add up; each plain init container runs alone (alongside the
// sidecars started before it), so the pod needs the maximum of the two.
func aggregateRequests(spec *corev1.PodSpec, name corev1.ResourceName) (resource.Quantity, bool) {
	found := false
	var sum, sidecars, initMax resource.Quantity
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		q, ok := c.Resources.Requests[name]
		if !ok {
			q = resource.Quantity{}
		} else {
			found = true
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(q)
			continue
		}
		peak := sidecars.DeepCopy()
		peak.Add(q)
		if peak.Cmp(initMax) > 0 {
			initMax = peak
		}
	}
	sum = sidecars.DeepCopy()
	for i := range spec.Containers {
		if q, ok := spec.Containers[i].Resources.Requests[name]; ok {
			found = true
			sum.Add(q)
		}
	}
	if initMax.Cmp(sum) > 0 {
		sum = initMax
	}
	return sum, found
}

func hostNetworkPorts(cs []corev1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

// roundResourceList is SetDefaults_ResourceList: quantities are rounded up
// to milli precision (upstream keeps this for API compatibility; 0.0001 cpu
// becomes 1m).
func roundResourceList(l corev1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}
