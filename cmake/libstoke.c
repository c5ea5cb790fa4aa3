/* libstoke.so: every library of the build in one (CMakeLists.txt, "Installing");
 * this file only gives the target a source of its own. */
typedef int stk_libstoke_unit;
