package config

// Local storage: the built-in local-path provisioner, as k3s ships one.
// The server's half (the PV binder, the default StorageClass, admission)
// and the node's half (the provisioner that makes and removes directories,
// the kubelet's mounts) must agree on these names.
const (
	// LocalPathStorageClass is the default StorageClass every cluster
	// starts with (WaitForFirstConsumer, reclaim policy Delete).
	LocalPathStorageClass = "local-path"
	// LocalPathProvisioner is its provisioner. Each node runs one, which
	// provisions only claims whose selected node is itself (upstream's
	// external-provisioner in its distributed, per-node mode).
	LocalPathProvisioner = "kelp.dev/local-path"
	// LocalPathProvisionerUser is the identity the node's provisioner uses
	// towards the API, shared by every node as ProxyUser is: it creates and
	// deletes the PersistentVolumes of its node's claims, which the Node
	// authorizer (rightly) never lets a node do.
	LocalPathProvisionerUser = "system:kelp-local-path-provisioner"
)

// LocalStorageDir is where a node keeps its local-path volumes: one
// directory per PersistentVolume under <data-dir>/storage.
func LocalStorageDir(dataDir string) string { return dataDir + "/storage" }
