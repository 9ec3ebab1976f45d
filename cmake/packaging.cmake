# The Debian package: `cpack -G DEB` in a build directory makes
# sagad_<version>_amd64.deb with the "server" component only (sagad,
# sagactl, the systemd unit, /etc/sagad/config.json as a conffile); the
# libraries and headers stay with `cmake --install`. EXCLUDE_FROM_ALL: a plain
# `cmake --install build --prefix P` never writes /etc or /lib/systemd.
install(TARGETS sagad sagactl RUNTIME DESTINATION bin COMPONENT server EXCLUDE_FROM_ALL)
install(FILES coordinator/server/debian/sagad.service DESTINATION /lib/systemd/system
        COMPONENT server EXCLUDE_FROM_ALL)
install(FILES coordinator/server/debian/config.json DESTINATION /etc/sagad COMPONENT server
        EXCLUDE_FROM_ALL)
install(FILES README.md docs/operations.md docs/configuration.md DESTINATION share/doc/sagad
        COMPONENT server EXCLUDE_FROM_ALL)

set(CPACK_PACKAGE_NAME sagad)
set(CPACK_PACKAGE_VERSION 0.1.0)
set(CPACK_PACKAGE_CONTACT "sagad maintainers <sagad@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "saga coordinator: effectively-once business transactions across HTTP services")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL OFF)
set(CPACK_COMPONENTS_ALL server)
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};sagad;server;/")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_SOURCE_DIR}/coordinator/server/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
