# Sourced by the template and walk-through tests: what a vendor runs outside vgpu's tree.
# install_sdk BUILD PREFIX: the `sdk` component of a vgpu build. build_and_test SRC BIN PREFIX
# LOG: the backend folder configured against that SDK, built, and its ctest run into LOG.
install_sdk() { cmake --install "$1" --component sdk --prefix "$2" >/dev/null; }
build_and_test() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$1" -B "$2" "${generator[@]}" -DVGPU_SDK_DIR="$3" >/dev/null
  cmake --build "$2"
  ctest --test-dir "$2" --output-on-failure -V | tee "$4"
}
