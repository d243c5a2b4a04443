// bench/compile_cost: what including ddp costs before any use.
#include <ddp/ddp.hpp>

int main() {}
