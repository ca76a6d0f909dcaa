// Package watch owns hostgate's view of the configuration: the sources
// (Kubernetes informers or YAML files on disk), the store of typed objects
// they fill, and the translation of that store into a Snapshot for the data
// plane and Reports for the status writer. It also keeps the last live
// Snapshot in a state file (StateFile), for a start while the API server is
// unreachable.
//
// Translation is a pure function of the store: it makes no API calls, so
// file mode and cluster mode share every line of it and golden tests pin it
// down. Kubernetes types never leave this package through the Snapshot; the
// Reports carry Gateway API and Ingress status types because status/ writes
// them back as they are.
//
// Ingress pathType ImplementationSpecific is served as Prefix (element-wise
// prefix matching), the behaviour most controllers give it.
package watch
