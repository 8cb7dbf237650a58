# kelp build. The same flags are used for dev builds, tests and CI so the
# Go build cache is shared between them.
GO ?= go
KUBE_VERSION ?= v1.37.2
KELP_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.kelpVersion=$(KELP_VERSION) \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=37

.PHONY: build run test bench fuzz vet
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kelp .

run: build
	./bin/kelp server

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

fuzz:
	bash scripts/fuzz.sh

vet:
	gofmt -l . | (! grep .) && $(GO) vet ./...
