fn main() {
    println!("cargo:rerun-if-changed=src/xenstore.d");
    // Without the `probes` feature there is no provider to generate.
    #[cfg(feature = "probes")]
    usdt::Builder::new("src/xenstore.d").build().unwrap();
}
