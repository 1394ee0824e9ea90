// Package tracing owns nodelet's OpenTelemetry tracer provider, from the
// KubeletConfiguration's tracing (KubeletTracing, GA): component-base's
// provider, as upstream's kubelet has it (an OTLP gRPC exporter to the
// endpoint, batched; samplingRatePerMillion of the traces nodelet starts,
// and every trace whose parent was sampled), with the resource service.name
// "kubelet" and host.name the node. Without tracing, a provider that
// records nothing. The spans are those of upstream: the CRI calls (the CRI
// client's gRPC instrumentation), syncPod, syncTerminatingPod,
// syncTerminatedPod, Images/GarbageCollect and Containers/GarbageCollect.
package tracing
