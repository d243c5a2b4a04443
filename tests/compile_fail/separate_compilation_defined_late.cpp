// EXPECT: DDP_SEPARATE_COMPILATION changed after the first ddp header: define it for the whole file
// The macro names the ABI namespace (config.hpp) and so must come before any
// ddp header; set late, the file would mix the two forms.
#include <ddp/process_group.hpp>
#define DDP_SEPARATE_COMPILATION
#include <ddp/ddp.hpp>

int main() {}
