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
// Manager keeps the store in step with the pods nodelet runs (a pass every
// few seconds writes the entries whose payload changed, and prunes only once
// the API source has synced, so nothing is forgotten for lack of the API
// server), restores the entries at start, and reports the offline state
// (healthz, metrics, log). Getter reads ConfigMaps, Secrets, tokens,
// PersistentVolumeClaims, PersistentVolumes and CSIDrivers through the API
// and falls back to the checkpoint when the API server is unreachable.
package checkpoint
