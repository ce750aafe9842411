# The two commands of README: `make demo` and `make test`.
.PHONY: demo test lint

demo:
	.ci/setup
	cargo build --release --workspace
	scripts/demo

test:
	.ci/setup
	cargo build --workspace
	cargo clippy --workspace --all-targets -- -D warnings
	# The Xen ring backend: built and linted here, exercised only on a Xen dom0.
	cargo clippy -p xenstored-probes --features xen --all-targets -- -D warnings
	cargo test -p xenstored-probes --features xen --lib ring::xen
	cargo test --workspace
