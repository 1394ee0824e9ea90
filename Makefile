# nodelet's front door. Targets that touch containerd, networking or cgroups
# need root (they run the scripts in hack/).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
export GOFLAGS ?= -buildvcs=false
export HOME ?= /root

.PHONY: build install uninstall test unit e2e demo demo-stop stack-up stack-down cluster-up cluster-down bench conformance vm-image vm-up vm-down vm-ssh vm-e2e vm-node-e2e clean

build: ## bin/nodelet
	go build -buildvcs=auto -o bin/nodelet ./cmd/nodelet

install: build ## nodelet in $(PREFIX)/bin (/usr/local), its systemd unit and kubeadm drop-in in /etc/systemd/system (DESTDIR stages)
	bash hack/install.sh

uninstall: ## removes what make install put in place
	bash hack/install.sh uninstall

test: ## the whole test suite: installs and starts the stack, unit + e2e tests
	bash hack/test.sh

unit: ## unit tests only (no stack needed)
	go test -race ./internal/... ./cmd/... ./hack/... ./bench/... ./test/agent/... ./test/conformance/...
	cd test/fakes && go test -race ./...

e2e: ## end-to-end tests against the local stack
	bash hack/test.sh e2e

demo: build ## stack up, nodelet standalone over examples/, show the pods
	bash hack/demo.sh

demo-stop: ## stop the demo's nodelet and its pods
	bash hack/demo.sh stop

stack-up: ## containerd + registry + images + CNI; writes .stack/env
	bash hack/stack-up.sh

stack-down: ## stops and removes everything stack-up started
	bash hack/stack-down.sh

cluster-up: ## control plane on 127.0.0.1 (after stack-up); adds KUBECONFIG, NODE_* to .stack/env
	bash hack/cluster/up.sh

cluster-down: ## stops the control plane
	bash hack/cluster/down.sh

bench: ## benchmarks; results in docs/benchmarks.md
	bash hack/bench.sh

conformance: ## upstream's NodeConformance e2e suite against the upstream kubelet and nodelet; docs/conformance.md
	bash hack/conformance.sh

vm-image: ## the real-node test bed's Debian 12 base image (debootstrap, Debian's kernel), cached in .cache/vm/<recipe hash>
	bash hack/vm/image.sh

vm-up: ## boots the real-node test bed: a Debian 12 guest (systemd, cgroup v2, containerd 2, runc) under qemu, reachable by hack/vm/ssh.sh (docs/real-node.md)
	bash hack/vm/up.sh

vm-down: ## powers the test bed's guest off and removes its bridge, tap device and forwards
	bash hack/vm/down.sh

vm-ssh: ## a root shell in the test bed's guest (or: hack/vm/ssh.sh CMD...)
	bash hack/vm/ssh.sh

vm-e2e: ## (after stack-up) the test bed's checks in the guest, the upstream kubelet and nodelet side by side; boots the guest if needed (docs/real-node.md)
	bash hack/vm/e2e.sh

vm-node-e2e: ## (after stack-up) upstream's node e2e suite (e2e_node.test) in the guest, the upstream kubelet and nodelet side by side (docs/real-node.md)
	bash hack/vm/node-e2e.sh

clean:
	rm -rf bin
