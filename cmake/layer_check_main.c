/* layer_check_main.c - the empty program of the sbx_layer_check_<layer> targets
 * (cmake/SbxLayers.cmake): it links one layer whole with only the layers below it, so a call
 * from that layer to one above it is an undefined reference and the build fails. It must never
 * do anything at run time.
 */
int main(void);

int main(void)
{
    return 0;
}
