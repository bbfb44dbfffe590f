fn main() {
    println!("tiny built and ran confined: {}", 6 * 7);
}
