fn main() {
    println!("cargo:rerun-if-changed=src/xenstore.d");
    usdt::Builder::new("src/xenstore.d").build().unwrap();
}
