"""The Vulkan runtime (wgpu): adapter discovery, the session, and the scope-copy shaders."""
