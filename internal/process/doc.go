// Package process owns the settings of nodelet's own process that the
// configuration asks for, applied once at start as upstream's kubelet does:
// its oom_score_adj (oomScoreAdj, -999 by default, so the kernel's OOM
// killer takes pods before the node agent) and its open files limit
// (maxOpenFiles). Neither failing stops nodelet (upstream logs and goes on):
// lowering the score or raising the hard limit needs CAP_SYS_RESOURCE.
package process
