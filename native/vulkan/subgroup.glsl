// Subgroup extensions for the USE_SUBGROUP=1 variant; included before any declaration.
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
