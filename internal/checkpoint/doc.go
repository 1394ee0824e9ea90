// Package checkpoint owns nodelet's local record of the API pods it runs,
// for offline autonomy (issue 20): per pod, the pod as last seen (spec,
// metadata, the status nodelet wrote) and the API objects its volumes and
// environment used (ConfigMaps; Secrets only when allowed), so the pods can
// be run again without the API server after a restart or a reboot.
//
// Each pod is one file <dir>/<uid>.json, mode 0600 in a 0700 directory,
// written atomically (a temporary file, fsync, rename, fsync of the
// directory) and checksummed (sha256 of its payload): a corrupt or partial
// entry is reported and skipped, never fatal. Entries are bounded in size,
// one by one and all together.
//
// So far: the store, tested alone; the sources, volumes and reconciliation
// that use it are still to come.
package checkpoint
