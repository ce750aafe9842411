//! Prints the C header xenstore-snoop's BPF programs are compiled with.

fn main() {
    print!("{}", xenstore_proto::bpf::contract_header());
}
