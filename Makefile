# Thin wrappers over scripts/: the build flags live in scripts/build.sh.
.PHONY: build run test bench fuzz
build:
	bash scripts/build.sh

run:
	bash scripts/run.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh

fuzz:
	bash scripts/fuzz.sh
