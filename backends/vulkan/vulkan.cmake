# Included by backends/CMakeLists.txt (same directory scope as tessera_backends, so the generated
# source is visible to it). The Vulkan compute backend: GLSL compute shaders compiled to SPIR-V with glslc at build time and
# embedded into the library as uint32 arrays (a generated .cc, never committed).
if(NOT Vulkan_INCLUDE_DIRS)
  message(FATAL_ERROR "TESSERA_VULKAN=ON needs the Vulkan headers (Debian: libvulkan-dev)")
endif()
if(NOT TESSERA_GLSLC)
  message(FATAL_ERROR "TESSERA_VULKAN=ON needs glslc (Debian: glslc)")
endif()

file(GLOB TESSERA_VULKAN_SHADERS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/shaders/*.comp)
file(GLOB TESSERA_VULKAN_SHADER_INCLUDES CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/shaders/*.glsl)
set(SPV_DIR ${CMAKE_CURRENT_BINARY_DIR}/vulkan/spirv)
file(MAKE_DIRECTORY ${SPV_DIR})
set(SPV_FILES)
foreach(src ${TESSERA_VULKAN_SHADERS})
  get_filename_component(name ${src} NAME_WE)
  set(spv ${SPV_DIR}/${name}.spv)
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${TESSERA_GLSLC} --target-env=vulkan1.1 -O -Werror
            -I ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/shaders -o ${spv} ${src}
    DEPENDS ${src} ${TESSERA_VULKAN_SHADER_INCLUDES}
    COMMENT "glslc ${name}.comp"
    VERBATIM)
  list(APPEND SPV_FILES ${spv})
endforeach()

set(EMBEDDED ${CMAKE_CURRENT_BINARY_DIR}/vulkan/vulkan_spirv_embedded.cc)
add_custom_command(
  OUTPUT ${EMBEDDED}
  COMMAND ${CMAKE_COMMAND} -DOUTPUT=${EMBEDDED} -DSPV_DIR=${SPV_DIR} "-DSPV_FILES=${SPV_FILES}" -P
          ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/embed_spirv.cmake
  DEPENDS ${SPV_FILES} ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/embed_spirv.cmake
  COMMENT "Embedding SPIR-V into vulkan_spirv_embedded.cc"
  VERBATIM)

file(GLOB TESSERA_VULKAN_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/*.cc
     ${CMAKE_CURRENT_SOURCE_DIR}/vulkan/pipelines/*.cc)
# Part of tessera_backends (it implements the Device contract that library defines).
target_sources(tessera_backends PRIVATE ${TESSERA_VULKAN_SOURCES} ${EMBEDDED})
# Headers only: the loader is opened with dlopen (vulkan_api.cc).
target_include_directories(tessera_backends PUBLIC ${Vulkan_INCLUDE_DIRS})
target_compile_definitions(tessera_backends PRIVATE VK_NO_PROTOTYPES TESSERA_HAVE_VULKAN=1)
target_link_libraries(tessera_backends PUBLIC ${CMAKE_DL_LIBS})
