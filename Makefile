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
	cargo test --workspace
