// Package controllers holds kelp's control loops, one package each
// (replicaset, deployment, namespace, serviceaccount, ...). Every
// controller is an API client like any other: client-go shared informers
// feed a rate-limited work queue of object keys, and a reconcile compares
// desired with observed state and takes one step. None of them touches
// storage. The manager (manager.go) runs them under leader election.
package controllers
